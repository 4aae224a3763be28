"""The nits of issue 36's walk-through, one test each (N7, the follow-ups already passed, is in
test_after_pass.py): file names, the mock's status line, the discuss deck, hint pointers, history,
tolerance words, grade's seed and plurals, a hanging file, what a Gradescope student sees, and the
recipe zip."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from attn_kit.base.paths import solutions_dir
from attn_kit.batch import autograder
from attn_kit.batch.formats import _shared, gradescope
from attn_kit.batch.run import GRADED, Batch, Result
from attn_kit.cli import cli
from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.practice import progress, review
from attn_kit.practice.mock import Status
from attn_kit.practice.store import open_store
from attn_kit.render import check
from attn_kit.render import grade as render_grade
from attn_kit.render import practice as render_practice
from attn_kit.report.results import tolerance_words

from helpers import graded

ROOT = Path(__file__).resolve().parent.parent
NO_SCALING = solutions_dir("mha-screen") / "bugs" / "no-scaling.py"
MHA = catalog.exercise("mha-screen")


def console(width: int = 80) -> Console:
    return Console(width=width, file=io.StringIO(), color_system=None, theme=check.THEME)


# --- N1: one file name per exercise, everywhere ------------------------------------------------


def test_n1_every_start_example_uses_the_file_start_writes():
    """`attn-kit start EX FILE` in the README, the docs and the command's help names the file
    `attn-kit start EX` writes; the quick start's check grades that same file."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    starts = []
    for path in texts:
        starts += re.findall(r"attn-kit start ([a-z0-9-]+) ([\w.]+\.py)", path.read_text(encoding="utf-8"))
    starts += re.findall(r"attn-kit start ([a-z0-9-]+) ([\w.]+\.py)", CliRunner().invoke(cli, ["start", "--help"]).output)
    assert len(starts) >= 4
    assert all(file == catalog.default_file(ex) for ex, file in starts), starts
    quick = next(b for b in (ROOT / "README.md").read_text(encoding="utf-8").split("```") if "attn-kit list" in b)
    assert "attn-kit check mha_screen.py " in quick and "solution.py" not in quick and "kv_cache.py" in quick


def test_n1_the_next_step_and_followups_use_the_same_name():
    status, command = progress.next_step(None)
    assert command == f"attn-kit start {status.exercise} {catalog.default_file(status.exercise)}"
    out = console(200)
    check.followups(MHA, out)
    for f in MHA.followups:
        if f.exercise in catalog.exercises():
            assert f"attn-kit start {f.exercise} {catalog.default_file(f.exercise)}" in out.file.getvalue()


# --- N2: the mock's status line keeps one format -------------------------------------------------


@pytest.mark.parametrize("width", [60, 80, 120])
def test_n2_mock_status_line_has_one_format_before_and_after_the_first_save(width):
    def shape(saves: int) -> str:
        status = Status(passed=1, total=3, failing=["public-attention-example", "public-masks-example"], saves=saves)
        return re.sub(r"\d+", "N", render_practice.mock_status(40 * 60, status, width=width).plain)

    assert shape(0) == shape(1) == shape(12)
    if width >= 120:  # room for the save count beside the names
        assert "saves N" in shape(0)


# --- N3: the discuss deck keeps its size -------------------------------------------------------------


def test_n3_discuss_deck_size_does_not_grow_mid_session(monkeypatch):
    """A card that comes due during the session (a minute after "again") is shown after the deck,
    as coming back, and the deck's count stays what it was."""
    real = review.queue
    deck: list[str] = []

    def queue(store, exercise, due_only=False, new=5, first=None):
        entries = real(store, exercise, due_only=due_only, new=new, first=first)
        if not deck:
            deck.extend(e.key for e in entries)
            return entries
        # the re-query at the deck's end: one more card came due (only the first time)
        extra = [e for e in real(store, exercise, new=50) if e.key not in deck][:1]
        deck.extend(e.key for e in extra)
        return extra

    monkeypatch.setattr(review, "queue", queue)
    answers = "".join("my answer\n\n3\n" for _ in range(6))
    result = CliRunner().invoke(cli, ["discuss", "mha-screen", "--new", "2"], input=answers)
    assert result.exit_code == 0, result.output
    assert set(re.findall(r"Card \d+/(\d+)", result.output)) == {"2"}, result.output  # 2 from first card to last
    assert result.output.count("Again · came back during this session") >= 1, result.output


# --- N5: a report's hint pointer and the footer's agree --------------------------------------------


def test_n5_footer_names_the_pointer_it_moves_past():
    report = graded(NO_SCALING, 1)
    pointed = {r.hint for r in report.results if r.status in ("fail", "error") and r.hint}
    assert len(pointed) == 1  # one bug: every failing check points at its topic's first hint
    (level,) = pointed
    with open_store() as store:
        store.add_hint("mha-screen", level)
        recorded = progress.record_check(store, report)
    out = console(200)
    render_practice.after_check(recorded, report, out)
    footer = out.file.getvalue()
    assert f"shows hint {recorded.next_hint}" in footer and recorded.next_hint != level
    assert f"after hint {level}, which you have seen" in footer, footer
    fresh = progress.Recorded(0, [], 0, len(MHA.hints), level)  # unseen: the footer names the very hint the report points at
    out = console(200)
    render_practice.after_check(fresh, report, out)
    assert f"shows hint {level}," in out.file.getvalue() and "which you have seen" not in out.file.getvalue()


# --- N6: history's dates do not wrap; its cards are named as discuss names them -------------------


def test_n6_history_reviews_fit_80_columns_and_name_cards_as_discuss_does():
    from datetime import timedelta

    from attn_kit.practice.store import now

    question = max(MHA.questions, key=lambda q: len(q.concept))
    at = now()
    with open_store() as store:
        review.review(store, "mha-screen", question, review.RATINGS["4"], at=at - timedelta(days=3))
        data = progress.history(store)
    out = console(80)
    render_practice.history(data, out)
    lines = out.file.getvalue().splitlines()
    rows = [line for line in lines if question.concept in line]
    assert len(rows) == 1, lines  # one line: nothing wrapped
    assert f"mha-screen · {question.concept}" in rows[0] and "next due in" in rows[0]
    front = console(80)
    render_practice.card_front(1, 1, SimpleNamespace(is_new=False, question=question, exercise=MHA), front)
    assert f"· {question.concept}" in front.file.getvalue() and "mha-screen" in front.file.getvalue()


# --- N8: the tolerance in words -------------------------------------------------------------------


def test_n8_tolerance_words_leave_out_zero_terms():
    assert tolerance_words(0, 0) == "must match exactly"
    assert tolerance_words(1e-8, 0) == "tolerance 1e-08"
    assert tolerance_words(0, 1e-6) == "tolerance 1e-06·|expected|"
    assert tolerance_words(1e-8, 1e-6) == "tolerance 1e-08 + 1e-06·|expected|"


# --- N9: grade's seed line and plurals ------------------------------------------------------------


def test_n9_a_given_seed_is_not_offered_back_and_counts_agree(capsys, monkeypatch):
    render_grade.seed_line(7, given=True)
    render_grade.seed_line(8)
    err = capsys.readouterr().err
    assert "seed 7" in err and "pass --seed 7" not in err and "pass --seed 8" in err
    report = graded(NO_SCALING, 1).to_json()
    out = console(200)
    monkeypatch.setattr(check, "console", lambda: out)
    render_grade.table(Batch("mha-screen", 7, [Result("a", "a.py", GRADED, report)], [], 1.0, 1))
    text = out.file.getvalue()
    assert "1 submission," in text and "1 job," in text and "submissions" not in text and "job(s)" not in text


# --- N10: a hanging file earns nothing for the calls it never finished ------------------------------


def hanging_file(tmp_path: Path) -> Path:
    source = (solutions_dir("mha-screen") / "reference_numpy.py").read_text()
    start = source.index("def multi_head_attention(")
    body = source.index(":\n", source.index(")", start)) + 2
    path = tmp_path / "hangs.py"
    path.write_text(source[:body] + "    while True:\n        pass\n" + source[body:])
    return path


@pytest.mark.slow
def test_n10_a_hanging_file_earns_no_unmodified_inputs_points_and_its_hidden_line_says_it_hung(tmp_path):
    report = pipeline.grade(hanging_file(tmp_path), pipeline.Options(exercise="mha-screen", seed=1, timeout=0.3))
    by_id = {r.id: r for r in report.results}
    assert by_id["inputs-left-unmodified"].status == "error" and by_id["inputs-left-unmodified"].points == 0
    shown = _shared.check_text(by_id["inputs-left-unmodified"].to_json(), False, {})
    assert "hung" in shown and "raised, hung or crashed" not in shown, shown
    # a reference still earns them: the rule stops hung calls only
    ok = graded(solutions_dir("mha-screen") / "reference_numpy.py", 1)
    assert next(r for r in ok.results if r.id == "inputs-left-unmodified").status == "pass"


# --- N12: what a Gradescope student sees ------------------------------------------------------------


def test_n12_a_bug_is_named_once_and_the_run_can_be_reproduced():
    report = graded(NO_SCALING, 1).to_json()
    batch = Batch("mha-screen", 1, [Result("no-scaling", str(NO_SCALING), GRADED, report)], [], 1.0, 1)
    data = gradescope.results(batch, batch.results[0])
    texts = [t["output"] for t in data["tests"]]
    failing = [t for t in data["tests"] if t["status"] == "failed"]
    assert len(failing) > 2
    assert sum("This matches a known bug" in t for t in texts) == 1
    first = next(t for t in data["tests"] if "This matches a known bug" in t["output"])
    title = first["name"].split(" [")[0]
    others = [t["output"] for t in failing if t is not first and "no-scaling" in t["output"]]
    assert others and all(f"The same cause as “{title}” (no-scaling)." in o for o in others)
    assert "attn-kit check no-scaling.py --exercise mha-screen --seed 1" in data["output"]


# --- N13: the recipe zip is the same bytes each time, with one date and regular modes --------------


def test_n13_recipe_zip_is_deterministic_with_consistent_modes_and_dates(tmp_path):
    a, b = tmp_path / "a.zip", tmp_path / "b.zip"
    autograder.write("gradescope", "mha-screen", a, seed=7)
    autograder.write("gradescope", "mha-screen", b, seed=7)
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as z:
        infos = z.infolist()
        wheel = z.read(autograder.wheel_name())
    with zipfile.ZipFile(io.BytesIO(wheel)) as w:
        infos += w.infolist()
    assert {i.date_time for i in infos} == {autograder.ZIP_DATE}
    modes = {i.filename: (i.external_attr >> 16) for i in infos}
    assert modes["setup.sh"] == modes["run_autograder"] == 0o100755
    assert all(mode == 0o100644 for name, mode in modes.items() if name not in ("setup.sh", "run_autograder")), modes
