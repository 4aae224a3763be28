"""Real public attention code (tests/corpus/real/): the verdict, the names, and no false accusation.
The test modules test_real_corpus*.py each take a third of the files, so that pytest-xdist spreads
the gradings over its processes.

Each file keeps a public implementation verbatim (a layer, a function, a library call) with a thin
adapter that maps only layouts to an exercise's interface; the licence and source are in its header.
Its expected diagnosis, in tests/corpus/real/expected.toml, was written from the code and the
contract before the kit judged it. Graded in-process (helpers.graded) on seeds 1-3:

- the verdict is the expected one (strict);
- nothing is named outside the file's `bugs` and `also_fair` ids (strict: a false accusation);
- every id of `bugs` is named on every seed. The ids the engine does not name yet are the file's
  `gaps`: those cases are expected failures (xfail, not strict), so a better engine turns them
  into passes, and then the id leaves `gaps`. A false accusation main's engine is known to make is
  the file's `known_false` (the same xfail, so that any other one still fails the test).

A torch file on a NumPy exercise imports torch while the kit loads it, within one call's timeout;
on a loaded machine that import alone can pass 10 s (a LoadError). These gradings get a 60 s
timeout: what they test is the diagnosis, and a wall-clock limit is not asserted in unit tests.

The expected lines (`lines`, for `check --locate`) are checked here only for being lines of the
file; benchmarks/diagnosis_rates.py and tests/corpus/real/README.md report how --locate does.
"""

from __future__ import annotations

import tomllib

import pytest

from conftest import CORPUS, need_torch
from helpers import graded

REAL = CORPUS / "real"
SEEDS = (1, 2, 3)
EXPECTED = tomllib.loads((REAL / "expected.toml").read_text(encoding="utf-8"))
FIELDS = {"exercise", "passes", "bugs", "lines", "also_fair", "offcatalogue", "gaps", "note"}
OPTIONAL = {"known_false"}
TIMEOUT = 60.0


def _report(name: str, seed: int):
    data = EXPECTED[name]
    if "import torch" in (REAL / name).read_text(encoding="utf-8"):
        need_torch()
    return graded(REAL / name, seed, data["exercise"], timeout=TIMEOUT)


def _named(name: str, seed: int) -> list[str]:
    return [d.bug for d in _report(name, seed).diagnosis]


def _cases(files):
    return [pytest.param(name, seed, id=f"{name}-seed{seed}") for name in files for seed in SEEDS]


def _accusation_cases(files):
    out = []
    for name, data in ((n, EXPECTED[n]) for n in files):
        known = data.get("known_false", [])
        marks = [pytest.mark.xfail(reason=f"known false accusation: {known}", strict=False)] if known else []
        out += [pytest.param(name, seed, marks=marks, id=f"{name}-seed{seed}") for seed in SEEDS]
    return out


def _name_cases(files):
    out = []
    for name, data in ((n, EXPECTED[n]) for n in files):
        for bug in data["bugs"]:
            marks = [pytest.mark.xfail(reason=f"known gap: {bug} is not named yet", strict=False)] if bug in data["gaps"] else []
            out += [pytest.param(name, seed, bug, marks=marks, id=f"{name}-{bug}-seed{seed}") for seed in SEEDS]
    return out


PARTS = 3  # test_real_corpus.py, test_real_corpus_b.py, test_real_corpus_c.py


def corpus_part(part: int) -> dict:
    """The slow tests over every PARTS-th file from `part` on, to bind in a test module's namespace."""
    files = sorted(EXPECTED)[part::PARTS]

    @pytest.mark.slow
    @pytest.mark.parametrize("name,seed", _cases(files))
    def test_the_verdict_is_right(name, seed):
        report = _report(name, seed)
        data = EXPECTED[name]
        assert report.passed is data["passes"], f"{name} seed {seed}: {[(r.id, r.status, r.message[:120]) for r in report.results]}"

    @pytest.mark.slow
    @pytest.mark.parametrize("name,seed", _accusation_cases(files))
    def test_nothing_is_named_that_the_file_does_not_do(name, seed):
        data = EXPECTED[name]
        fair = set(data["bugs"]) | set(data["also_fair"])
        named = _named(name, seed)
        assert set(named) <= fair, f"{name} seed {seed}: false accusation {sorted(set(named) - fair)} (named {named})"

    @pytest.mark.slow
    @pytest.mark.parametrize("name,seed,bug", _name_cases(files))
    def test_every_mistake_the_file_makes_is_named(name, seed, bug):
        assert bug in _named(name, seed), f"{name} seed {seed}: {bug} not named"

    return {
        "test_the_verdict_is_right": test_the_verdict_is_right,
        "test_nothing_is_named_that_the_file_does_not_do": test_nothing_is_named_that_the_file_does_not_do,
        "test_every_mistake_the_file_makes_is_named": test_every_mistake_the_file_makes_is_named,
    }
