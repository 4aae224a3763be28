"""check --locate: edits spliced into the candidate's own text, the search on a few corpus files
end to end (the edit is verified, on the recorded wrong line, and the file on disk is untouched),
the JSON key against the shipped schema, and the mock report's record of its use."""

from __future__ import annotations

import ast
import io
import os
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest

from attn_kit.grading import locate, pipeline
from attn_kit.practice.store import open_store
from attn_kit.render import check
from attn_kit.report import jsonout
from attn_kit.report.results import FAILED, CheckStatus

from helpers import check_json

CORPUS = Path(__file__).parent / "corpus" / "locate"
EXPECTED = tomllib.loads((CORPUS / "corpus.toml").read_text())
SEED = 4242


def edits_of(text: str, bugs=()) -> list[locate.Edit]:
    return locate.propose(text, ast.parse(text), None, set(bugs))


def test_an_edit_rewrites_only_its_expression_and_keeps_the_rest_of_the_line():
    text = "def f(i, j):\n    return (j < i)  # keep this comment\n"
    edit = next(e for e in edits_of(text) if e.text == "j <= i")
    assert locate.apply(text, [edit]) == "def f(i, j):\n    return (j <= i)  # keep this comment\n"
    [(first, before, after)] = locate.diff(text, [edit])
    assert first == 2 and before == ["    return (j < i)  # keep this comment"]
    assert after == ["    return (j <= i)  # keep this comment"]


def test_operators_propose_the_classic_fixes():
    text = (
        "import numpy as np\n"
        "def attn(q, k, v, allowed, hd, D):\n"
        "    s = q @ k.T / np.sqrt(D)\n"
        "    s = np.where(allowed, s, -1e9)\n"
        "    m = s.max(axis=0, keepdims=True)\n"
        "    e = np.exp(s - m)\n"
        "    return e / e.sum(axis=-1, keepdims=True) @ v\n"
    )
    changed = {locate.apply(text, [e]).splitlines()[e.start[0] - 1].strip() for e in edits_of(text)}
    assert "s = q @ k.T / np.sqrt(hd)" in changed  # the width under the root
    assert "s = np.where(allowed, s, float('-inf'))" in changed  # -1e9 -> -inf
    assert "m = s.max(axis=-1, keepdims=True)" in changed  # the axis of a reduction
    assert "s = np.where(~allowed, s, -1e9)" in changed  # the mask negated
    assert "s = k.T @ q / np.sqrt(D)" in changed  # swapped operands
    assert "s = q @ k / np.sqrt(D)" in changed  # a transpose removed


def test_operators_propose_the_one_line_fix_of_each_catalogue_family():
    text = (
        "import math\n"
        "import numpy as np\n"
        "class Layer:\n"
        "    def project(self, x, name):\n"
        "        y = x @ self.p['W' + name]\n"
        "        b = self.p.get('b' + name)\n"
        "        return y\n"
        "    def run(self, x, B, T, H, hd, D):\n"
        "        q = self.project(x, 'q').reshape(B, H, T, hd)\n"
        "        k = self.project(x, 'q').reshape(B, T, H, hd).swapaxes(1, 2)\n"
        "        v = self.project(x, 'v').reshape(B, T, H, hd).swapaxes(1, 2)\n"
        "        scores = q @ k.swapaxes(-1, -2)\n"
        "        scaled = scores\n"
        "        other = scores / math.sqrt(q.shape[-1] * H)\n"
        "        cols = [x[:, :, slice(h, D, H)] for h in range(H)]\n"
        "        ctx = (scaled @ q).swapaxes(1, 2).reshape(B, T, D)\n"
        "        return ctx, cols\n"
    )
    changed = {locate.apply(text, [e]).splitlines()[e.start[0] - 1].strip() for e in edits_of(text)}
    assert "k = self.project(x, 'k').reshape(B, T, H, hd).swapaxes(1, 2)" in changed  # which projection is asked for
    assert "q = self.project(x, 'q').reshape(B, T, H, hd).swapaxes(1, 2)" in changed  # heads split without the move
    assert "scaled = scores / hd ** 0.5" in changed  # a scale left out
    head = "def head(q, k):\n    scores = q @ k.T\n    scaled = scores\n    return scaled\n"
    assert any(locate.apply(head, [e]).splitlines()[2].strip() == "scaled = scores / q.shape[-1] ** 0.5" for e in edits_of(head))
    assert "other = scores / math.sqrt(q.shape[-1])" in changed  # a factor too many under the root
    powers = "def f(d, s):\n    inv = d**-1.0\n    return s * d**1\n"
    fixed = {locate.apply(powers, [e]) for e in edits_of(powers)}
    assert "def f(d, s):\n    inv = d ** (-0.5)\n    return s * d**1\n" in fixed  # the width, not its root
    assert "def f(d, s):\n    inv = d**-1.0\n    return s * d ** 0.5\n" in fixed
    passed = "def run(x, position, cache):\n    return step(x, 0, cache)\n"
    assert "def run(x, position, cache):\n    return step(x, position, cache)\n" in {locate.apply(passed, [e]) for e in edits_of(passed)}
    assert "cols = [x[:, :, slice(h * hd, (h + 1) * hd)] for h in range(H)]" in changed  # a head's own columns
    assert "ctx = (scaled @ v).swapaxes(1, 2).reshape(B, T, D)" in changed  # the values, not the queries
    assert "return y + (b if b is not None else 0)" in changed  # a bias read and never added
    assert "return (self.project(ctx, 'o'), cols)" in changed or "return self.project(ctx, 'o'), cols" in changed


def test_edits_matching_the_diagnosed_bug_come_first():
    text = "import math\ndef f(s, m, i, j, D, hd):\n    return math.exp(s - m) / math.sqrt(D) if j < i else 0\n"
    assert "scale-by-model-width" in edits_of(text, ["scale-by-model-width"])[0].bugs
    assert "causal-off-by-one" in edits_of(text, ["causal-off-by-one"])[0].bugs
    assert edits_of(text)[0].bugs != edits_of(text, ["scale-by-model-width"])[0].bugs


def test_the_output_projection_is_proposed_the_way_the_queries_are_projected():
    text = (
        "def lin(t, w, b):\n    return t\n"
        "def f(x, params):\n    q = lin(x, params['Wq'], params.get('bq'))\n    out = []\n"
        "    out.append(q * 2)\n    return out\n"
    )
    texts = {e.text for e in edits_of(text) if e.operator == "term"}
    assert "lin(q * 2, params['Wo'], params.get('bo'))" in texts
    with_wo = text.replace("return out", "return out, params['Wo']")
    assert not any("'Wo'" in e.text for e in edits_of(with_wo))  # it projects already


def test_a_permutation_of_the_keys_may_become_the_usual_transpose():
    text = "def f(q, k):\n    return q @ k.transpose(0, 2, 1, 3)\n"
    assert "k.transpose(0, 1, 3, 2)" in {e.text for e in edits_of(text)}


def test_overlapping_edits_are_never_paired():
    text = "def f(a, b):\n    return (a < b) < 1\n"
    edits = edits_of(text)
    inner = next(e for e in edits if e.text == "a <= b")
    outer = next(e for e in edits if e.start == (2, 11) and e is not inner and e.end[1] > inner.end[1])
    assert inner.overlaps(outer)
    partial = [
        locate.Partial(inner, frozenset({"x"}), frozenset({"y"}), 0.5),
        locate.Partial(outer, frozenset({"y"}), frozenset({"x"}), 0.5),
    ]
    assert all(not a.overlaps(b) for a, b in locate._pairs(partial, edits))


def mismatch(wrong: int, max_abs: float, nan: int = 0, shape=(2, 4)):
    from attn_kit.report.results import Mismatch

    return Mismatch("output", shape, max_abs, 1.0, (0, 0), "", "", (), (), 0, nan, 0, wrong, 8, 1e-6, 1e-8)


def test_closer_measures_progress_on_a_check_that_still_fails():
    fail, error = CheckStatus.FAIL, CheckStatus.ERROR
    assert locate._closer(fail, mismatch(8, 2.0), fail, mismatch(8, 2.0)) == 0.0  # no change
    assert locate._closer(fail, mismatch(8, 2.0), fail, mismatch(9, 3.0)) == 0.0  # further
    assert locate._closer(fail, mismatch(8, 2.0), fail, mismatch(2, 2.0)) == 0.75  # fewer wrong entries
    assert locate._closer(fail, mismatch(8, 2.0), fail, mismatch(8, 0.2)) == 0.45  # much nearer
    assert locate._closer(fail, mismatch(8, 2.0), fail, mismatch(8, 1.5)) == 0.0  # not much nearer
    assert locate._closer(fail, mismatch(8, float("nan"), nan=3), fail, mismatch(8, 2.0)) == 0.5  # NaN gone
    assert locate._closer(error, None, fail, mismatch(8, 2.0)) == 0.3  # values, not an exception
    assert locate._closer(fail, mismatch(8, 2.0), fail, mismatch(1, 0.1, shape=(4, 2))) == 0.0  # not comparable


def test_pairs_are_guided_by_what_each_edit_left_failing():
    """An edit that came closer but left a check failing is paired first with an edit whose kind
    repairs a bug that check catches, before edits ranked above that one; two edits that each
    came closer are paired too."""
    text = (
        "import math\ndef f(s, m, hd, allowed, v, w):\n    x = math.exp(s - m) if not allowed else 0.0\n"
        "    return (x * v + w) / math.sqrt(hd)\n"
    )
    edits = edits_of(text)
    negate = next(e for e in edits if e.operator == "negate")
    wanted = {"biases-ignored"}
    partner = next(e for e in edits if set(e.bugs) & wanted and not e.overlaps(negate))
    assert next(e for e in edits if e is not negate and not e.overlaps(negate)) is not partner  # not first anyway
    partial = [locate.Partial(negate, frozenset(), frozenset({"scaled"}), 0.4)]
    assert locate._pairs(partial, edits, any_two=False, catches=lambda ids: wanted if "scaled" in ids else set())[0] == (negate, partner)
    assert locate._pairs(partial, edits, any_two=False) == []  # nothing repaired, nothing to guide it
    other = next(e for e in edits[::-1] if not e.overlaps(negate))  # ranked last
    both = [locate.Partial(negate, frozenset(), frozenset(), 0.4), locate.Partial(other, frozenset(), frozenset(), 0.2)]
    assert locate._pairs(both, edits, any_two=False) == [(negate, other)]


def graded(name: str):
    path = CORPUS / name
    return path, pipeline.grade(path, pipeline.Options(seed=SEED))


@pytest.mark.parametrize(
    "name",
    [
        "lists_compact__causal-off-by-one.py",
        pytest.param("numpy_heads_loop__mask-inverted.py", marks=pytest.mark.slow),
        pytest.param("einsum__scale-by-model-width.py", marks=pytest.mark.slow),
    ],
)
def test_locate_finds_a_verified_edit_on_the_wrong_line_and_leaves_the_file_alone(name):
    path, report = graded(name)
    assert not report.passed
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    found = locate.locate(path, report, pipeline.Options(seed=SEED), budget=60)
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
    assert found.found is not None, found
    assert set(found.found.lines) & set(EXPECTED[name]["lines"])
    assert set(found.found.repairs) == {r.id for r in report.results if r.status in FAILED}
    tmp = Path(os.environ["ATTN_KIT_HOME"]) / name  # grade the edited text ourselves: every check passes
    tmp.write_text(locate.apply(path.read_text(), found.found.edits))
    for seed in (SEED, SEED + 1):
        assert pipeline.grade(tmp, pipeline.Options(seed=seed)).passed


def test_a_miss_names_the_line_where_the_values_go_wrong_and_no_line_range():
    # no operator reads a bias the file never reads, so no budget finds an edit here (a file whose
    # fix the search merely had not reached in time made this test pass or fail with the load);
    # the traced values still show where the biases should have been added
    path, report = graded("lists_compact__biases-ignored.py")
    found = locate.locate(path, report, pipeline.Options(seed=SEED), budget=1.5)
    assert found.found is None and found.stopped in ("budget", "exhausted")
    assert found.trace is not None
    [first, *_] = found.trace.divergences
    assert first.line == 46 and first.stage == "q_proj" and "bias" in first.relation
    out = check.Console(width=80, file=io.StringIO(), color_system=None, theme=check.THEME)
    check.located(found, report, out=out)
    text = " ".join(out.file.getvalue().split())
    assert "Look at line 46." in text and "should be the projected queries" in text
    assert "No verified edit fixes every failing check" in text
    assert not re.search(r"lines \d+-\d+", text)  # never the functions' whole line ranges


def test_a_passing_file_is_not_searched():
    path = CORPUS / "bases" / "lists_compact.py"
    report = pipeline.grade(path, pipeline.Options(seed=SEED))
    assert report.passed
    assert locate.locate(path, report, pipeline.Options(seed=SEED)).stopped == "passed"


@pytest.mark.slow
def test_json_carries_locate_under_its_documented_key(tmp_path):
    target = tmp_path / "solution.py"
    target.write_text((CORPUS / "lists_compact__mask-inverted.py").read_text())
    data, code = check_json(target, "--seed", str(SEED), "--locate", "--fix")
    assert code == 1
    jsonschema.validate(data, jsonout.schema("check"))
    found = data["locate"]["found"]
    assert found and set(found["lines"]) & set(EXPECTED["lists_compact__mask-inverted.py"]["lines"])
    assert found["diff"] and found["diff"][0]["before"] != found["diff"][0]["after"]
    plain, _ = check_json(target, "--seed", str(SEED))
    assert "locate" not in plain
    assert "locate" in jsonout.schema("check")["properties"]


def test_a_mock_report_records_locate_runs():
    from datetime import timedelta

    from attn_kit.practice import mock
    from attn_kit.practice.store import now

    store = open_store()
    start = now()
    assert mock.locate_count(store, "mha-screen", start, start + timedelta(minutes=1)) == 0
    fields = dict(
        file="s.py",
        seed=1,
        passed=False,
        checks_passed=0,
        checks_total=1,
        points=0,
        max_points=1,
        public_only=False,
        failing=["x"],
        bugs=[],
        concepts_failed=[],
    )
    store.add_check(exercise="mha-screen", source="locate", at=start + timedelta(seconds=5), **fields)
    store.add_check(exercise="mha-screen", source="check", at=start + timedelta(seconds=6), **fields)
    store.add_check(exercise="gqa", source="locate", at=start + timedelta(seconds=7), **fields)
    assert mock.locate_count(store, "mha-screen", start, start + timedelta(minutes=1)) == 1
    store.close()


def test_the_corpus_records_its_wrong_lines_and_mixes_styles():
    assert len(EXPECTED) >= 60
    for name, entry in EXPECTED.items():
        lines = (CORPUS / name).read_text().splitlines()
        assert entry["lines"] and all(1 <= n <= len(lines) for n in entry["lines"]), name
        assert len(entry["mistakes"]) == len(entry["catalogue"]) in (1, 2, 3)
    counts = [len(e["mistakes"]) for e in EXPECTED.values()]
    assert {1, 2, 3} <= set(counts)
    styles = {name.split("__")[0] for name in EXPECTED}
    assert {"lists_compact", "lists_loops", "numpy_heads_loop", "torch_batched", "einsum"} <= styles
    assert any(not all(e["catalogue"]) for e in EXPECTED.values())


def test_mock_report_data_has_the_locate_field(tmp_path):
    from attn_kit.load import catalog
    from attn_kit.practice import mock
    from attn_kit.practice.store import now

    session = mock.Session(catalog.exercise("mha-screen"), tmp_path, tmp_path / "s.py", 30, 1, now())
    data = mock.report_data(session, mock.MockStatus.SUBMITTED, 1.0, now(), locate_runs=2)
    assert data["locate"] == {"used_during_session": True, "runs": 2}
    assert mock.report_data(session, mock.MockStatus.SUBMITTED, 1.0, now())["locate"]["used_during_session"] is False


@pytest.mark.slow
def test_plain_check_mentions_locate_once_and_locate_refuses_watch(tmp_path):
    from helpers import attn_kit

    target = tmp_path / "solution.py"
    target.write_text((CORPUS / "lists_compact__causal-off-by-one.py").read_text())
    proc = attn_kit("check", target, "--seed", "7")
    assert proc.returncode == 1 and proc.stdout.count("--locate") == 1 and "Locate" not in proc.stdout
    passing = attn_kit("check", CORPUS / "bases" / "lists_compact.py", "--seed", "7")
    assert passing.returncode == 0 and "--locate" not in passing.stdout
    misuse = attn_kit("check", target, "--locate", "--watch")
    assert misuse.returncode == 2 and "--watch" in misuse.stderr and "Traceback" not in misuse.stderr
