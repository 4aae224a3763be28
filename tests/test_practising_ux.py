"""Practising without stumbling: the starter earns nothing, compact failures, a legend, a short
pass, where-am-I on plain `attn-kit`, statuses in `list`, and the right exercise named."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from attn_kit.base.errors import LoadError
from attn_kit.base.paths import solutions_dir
from attn_kit.cli import cli
from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.practice.store import open_store
from attn_kit.render import check, screen

MHA = catalog.exercise("mha-screen")
README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ux")
    starter = folder / "solution.py"
    starter.write_text(MHA.starter, encoding="utf-8")
    reference = solutions_dir("mha-screen") / "reference_lists.py"
    return {
        "starter": pipeline.grade(starter, pipeline.Options(seed=5)),
        "pass": pipeline.grade(reference, pipeline.Options(seed=5)),
        "public": pipeline.grade(reference, pipeline.Options(seed=5, public_only=True)),
        "bug": pipeline.grade(solutions_dir("mha-screen") / "bugs" / "no-scaling.py", pipeline.Options(seed=5)),
    }


def text(report, width=100, **kw) -> str:
    out = Console(width=width, file=io.StringIO(), color_system=None, theme=check.THEME)
    screen.report(report, MHA, out=out, **kw)
    return out.file.getvalue()


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def test_the_untouched_starter_earns_no_points(graded):
    report = graded["starter"]
    assert report.points[0] == 0
    unmodified = next(r for r in report.results if r.id == "inputs-left-unmodified")
    assert unmodified.status == "error" and unmodified.points == 0 and "NotImplementedError" in unmodified.message


def test_many_failures_are_compact_by_default_and_first_or_full_choose(graded):
    def blocks(out):
        return sum(1 for line in out.splitlines() if line.startswith(("! ", "✗ ")) and " — " in line)

    default = text(graded["starter"])  # the first screen: one failure in full, and what shows more
    assert blocks(default) == 1 and "--full: each failure in full" in default
    assert blocks(text(graded["starter"], first=True)) == 1 and "the first failure in full" in text(graded["starter"], first=True)
    assert blocks(text(graded["starter"], first=False)) > 5
    bug = text(graded["bug"])  # few distinct failures: every one in full
    assert "the first failure in full" not in bug
    assert blocks(text(graded["bug"], first=True)) == 1


def test_a_legend_explains_the_marks_that_appear(graded):
    out = text(graded["starter"], first=True)  # the table's legend: --first and --full
    assert "✗ failed · ! your code raised, hung or crashed · – not checked (no points)" in out
    only_fail = text(graded["bug"], first=True)
    assert "✗ failed" in only_fail and "! your code raised" not in only_fail
    # the score line counts the – checks in the legend's words
    skipped = sum(r.status == "skip" for r in graded["starter"].results)
    assert skipped and f", {skipped} not checked — " in out and "skipped" not in out


def test_no_worst_rows_advice_when_no_row_was_shown(graded):
    out = text(graded["starter"], first=True)
    assert "read the worst rows above" not in out and "read the messages above" in out


def test_a_full_pass_is_short_and_the_readme_says_so(graded):
    out = text(graded["pass"])
    line = "✓ All 26 checks passed — 47/47 points."
    assert line in out and "public-softmax-example" not in out and "points\n" not in out
    header, verdict = out.splitlines()[:2]  # the header on one line (a long path is shortened), then the line
    assert header.startswith("attn-kit check mha-screen") and header.endswith(f"seed {graded['pass'].seed}")
    assert verdict == line
    assert f"`{line}`" in README


def test_public_runs_print_no_seed(graded):
    assert "seed" not in text(graded["public"]).lower()
    failing = pipeline.grade(graded["starter"].path, pipeline.Options(public_only=True))
    assert "seed" not in text(failing).lower()


def test_a_wrong_exercise_names_what_the_functions_look_like(tmp_path):
    with pytest.raises(LoadError, match=r"looks like a kv-cache solution \(it defines `decode_step`\).*--exercise kv-cache"):
        pipeline.grade(solutions_dir("kv-cache") / "reference_numpy.py", pipeline.Options(exercise="mha-screen"))
    # the same through a file's header
    headed = tmp_path / "solution.py"
    body = (solutions_dir("kv-cache") / "reference_numpy.py").read_text(encoding="utf-8").split("\n", 1)[1]
    headed.write_text("# attn-kit: mha-screen\n" + body, encoding="utf-8")
    with pytest.raises(
        LoadError,
        match=r"looks like a kv-cache solution .*its header `# attn-kit: mha-screen`.*"
        r"--exercise kv-cache",
    ):
        pipeline.grade(headed, pipeline.Options())


def test_show_suggests_the_dashed_id():
    result = invoke("show", "mha_screen")
    assert result.exit_code == 2 and "Did you mean `mha-screen`?" in result.stderr


def test_plain_attn_kit_points_to_the_next_step(attn_home, tmp_path):
    fresh = invoke()
    assert fresh.exit_code == 0
    assert "Current exercise: mha-screen (not started)" in fresh.stdout
    assert "Next: attn-kit start mha-screen mha_screen.py" in fresh.stdout
    assert not (attn_home / "history.db").exists()
    with open_store() as store:
        store.add_check(
            exercise="kv-cache",
            file="decode.py",
            seed=1,
            passed=False,
            checks_passed=3,
            checks_total=9,
            points=4,
            max_points=20,
            public_only=False,
            failing=[],
            bugs=[],
            concepts_failed=[],
        )
    later = invoke()
    assert "Current exercise: kv-cache (attempted · best 3/9)" in later.stdout
    assert "Next: attn-kit check decode.py" in later.stdout


def test_list_shows_status_and_best_score():
    with open_store() as store:
        store.add_check(
            exercise="mha-screen",
            file="s.py",
            seed=1,
            passed=True,
            checks_passed=26,
            checks_total=26,
            points=47,
            max_points=47,
            public_only=False,
            failing=[],
            bugs=[],
            concepts_failed=[],
        )
    out = invoke("list").stdout
    rows = {line.split()[0]: line for line in out.splitlines() if line and line.split()[0] in catalog.exercises()}
    assert "passed · best 26/26" in rows["mha-screen"] and "not started" in rows["gqa"]


def test_check_first_flag_smoke(tmp_path):
    path = tmp_path / "solution.py"
    path.write_text(MHA.starter, encoding="utf-8")
    result = invoke("check", path, "--first", "--seed", "3")
    assert result.exit_code == 1 and "the first failure in full" in result.stdout
