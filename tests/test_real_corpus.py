"""Real public attention code (tests/corpus/real/), the first third of the files, and the corpus's
data: see tests/real_corpus.py."""

from __future__ import annotations

from attn_kit.load import catalog

from real_corpus import EXPECTED, FIELDS, OPTIONAL, REAL, corpus_part

globals().update(corpus_part(0))


def test_the_corpus_is_complete_and_its_data_consistent():
    files = sorted(p.name for p in REAL.glob("*.py"))
    assert files == sorted(EXPECTED), "every file has its expectations and every expectation its file"
    assert len(files) >= 30
    known = set(catalog.bugs())
    exercises = set(catalog.exercises())
    for name, data in EXPECTED.items():
        assert FIELDS <= set(data) <= FIELDS | OPTIONAL, f"{name}: fields {sorted(set(data) ^ FIELDS)}"
        text = (REAL / name).read_text(encoding="utf-8")
        lines = text.splitlines()
        assert lines[0] == f"# attn-kit: {data['exercise']}" and data["exercise"] in exercises, name
        assert "Licence:" in text and "Source: https://github.com/" in text, f"{name}: source and licence in the header"
        for licence in (part.split()[0] for part in text.split("tests/corpus/real/LICENSES/")[1:]):
            assert (REAL / "LICENSES" / licence).is_file(), f"{name}: {licence}"
        named = set(data["bugs"]) | set(data["also_fair"]) | set(data.get("known_false", []))
        assert named <= known, f"{name}: {sorted(named - known)} are not catalogue ids"
        assert not set(data.get("known_false", [])) & (set(data["bugs"]) | set(data["also_fair"])), name
        assert not set(data["bugs"]) & set(data["also_fair"]), name
        assert set(data["gaps"]) <= set(data["bugs"]), name
        assert data["passes"] == (not data["bugs"] and not data["offcatalogue"]), f"{name}: the verdict follows from the deviations"
        assert set(data["lines"]) == set(data["bugs"]), f"{name}: a line (or an empty list) for every expected id"
        for bug, where in data["lines"].items():
            assert all(1 <= n <= len(lines) and lines[n - 1].strip() for n in where), f"{name}: {bug} at {where}"
