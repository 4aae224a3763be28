"""Real public attention code (tests/corpus/real/), part 3 of 3 of the files: see tests/real_corpus.py."""

from real_corpus import corpus_part

globals().update(corpus_part(2))
