"""A mock for someone practising alone ends with a self-assessment they can use: on a terminal, after
the report, each dimension the kit could not score is shown with its four anchors and scored 1-4
(Enter skips); the scores are recorded in report.json and report.md, and the recommendation comes
only from the scores given. On a pipe nothing is asked (the report keeps the command that gives
the rest). Run in a real pseudo-terminal at 80×24."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pexpect
import pytest
from test_mock import save, session_file

from attn_kit.grading import rubric
from attn_kit.load import catalog
from attn_kit.practice import mock

from test_practice import NO_SCALING, REFERENCE, finish, plain, spawn

EXERCISE = catalog.exercise("mha-screen")


def screen_of(child: pexpect.spawn) -> str:
    return " ".join(plain(child.logfile_read.getvalue()).split())


def start(tmp_path, source) -> tuple[pexpect.spawn, object]:
    """A mock at 80×24 with `source` saved, submitted, graded, its discussion cut short (^D)."""
    child = spawn("mock", "mha-screen", "--dir", tmp_path, "--minutes", "30", timeout=90)
    child.setwinsize(24, 80)
    child.logfile_read = io.StringIO()
    child.expect("s submit")  # the live status line (at 80 columns it has no room for "public checks")
    sol = session_file(tmp_path)
    save(sol, source)
    child.expect(r"saves 1")
    child.send("s")
    child.expect("The full graded suite")
    child.expect("an empty line ends your answer")
    child.sendeof()  # the discussion is cut short: systems stays to be scored
    child.expect(r"report\.md")
    return child, sol


@pytest.mark.slow
def test_a_solo_candidate_scores_themselves_and_gets_the_verdict(tmp_path):
    child, sol = start(tmp_path, REFERENCE)
    child.expect("Score yourself")
    child.expect(r"Level \(junior, mid, senior\) \[mid\]: ")
    child.sendline("senior")
    asked = []
    answers = {"robustness": "4", "shapes": "4", "tests": "3", "systems": "3", "communication": "4"}
    while True:
        index = child.expect([r"(\w+) 1-4 \(Enter skips\): ", r"Recommendation \(senior level, from the scores given\)"])
        if index == 1:
            break
        dimension = child.match.group(1)
        asked.append(dimension)
        child.sendline(answers[dimension])
    child.expect(r"Recorded \(")
    assert finish(child) == 0
    text = screen_of(child)
    row = next(d for d in EXERCISE.scoring if d.dimension == "robustness")
    shown = text.split("robustness (1/5)", 1)[1].split("robustness 1-4", 1)[0]
    for number, anchor in enumerate(row.anchors, 1):  # each anchor, numbered, before the question
        assert f"{number} " + " ".join(anchor.split()[:6]) in shown, (anchor, shown)
    data = json.loads((sol.parent / "report.json").read_text())
    scores = {r["dimension"]: r["score"] for r in data["scoring"]}
    assert asked == [d for d in catalog.DIMENSIONS if d != "correctness"]  # correctness is the kit's
    given = {d: int(answers[d]) for d in asked}
    assert scores == {"correctness": 4, **given}
    verdict, _ = rubric.recommend(scores, "senior")
    assert data["level"] == "senior" and data["recommendation"]["verdict"] == verdict
    assert f"Recommendation: {verdict}" in text
    assert all(r["given_by"] == "self" for r in data["scoring"] if r["dimension"] in given)
    markdown = (sol.parent / "report.md").read_text()
    assert f"Recommendation: **{verdict}**" in markdown and "| robustness | 4/4 (self) |" in markdown


@pytest.mark.slow
def test_skipped_dimensions_leave_no_verdict_only_what_the_scores_rule_out(tmp_path):
    child, sol = start(tmp_path, NO_SCALING)
    child.expect(r"Level .*\[mid\]: ")
    child.sendline("")  # Enter: mid
    child.expect(r"robustness 1-4 \(Enter skips\): ")
    child.sendline("9")  # not a score: asked again
    child.expect("Type one of: 1, 2, 3, 4, or Enter.")
    child.expect(r"robustness 1-4 \(Enter skips\): ")
    child.sendline("1")
    child.expect(r"shapes 1-4 \(Enter skips\): ")
    child.sendline("")  # skipped
    child.expect(r"tests 1-4 \(Enter skips\): ")
    child.sendeof()  # end of input: stop asking, keep what was given
    child.expect(r"Recorded \(robustness 1\)")
    assert finish(child) == 0
    text = screen_of(child)
    data = json.loads((sol.parent / "report.json").read_text())
    rec = data["recommendation"]
    assert rec["verdict"] is None and "none yet" in text
    scores = {r["dimension"]: r["score"] for r in data["scoring"]}
    assert scores["robustness"] == 1 and scores["shapes"] is None and scores["tests"] is None
    assert rec["range"] == list(rubric.recommendation_range(scores, "mid"))
    assert f"anything better than {rec['range'][1]}" in text
    assert re.search(r"attn-kit mock mha-screen --interviewer --scores correctness=\d,robustness=1,shapes=\?", text)


def test_a_pipe_is_never_asked(tmp_path):
    """On a pipe (--unattended) the session ends without a question: with its stdin a pipe left
    open and never written to, the command still ends, and the report keeps no self-given score."""
    env = dict(os.environ, ATTN_KIT_CLOCK_SCALE="600")
    argv = [sys.executable, "-m", "attn_kit.cli", "mock", "mha-screen", "--dir", str(tmp_path), "--minutes", "1", "--unattended"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True) as proc:
        try:
            out, err = proc.communicate(timeout=120)  # stdin stays open: a read would wait forever
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("mock waited for input on a pipe") from None
    assert proc.returncode == 0, err
    assert "Score yourself" not in out and "1-4 (Enter skips)" not in out
    [report] = tmp_path.glob("mock-mha-screen-*/report.json")
    data = json.loads(report.read_text())
    assert "level" not in data and not any(r.get("given_by") for r in data["scoring"])
    assert data["recommendation"] == mock.recommendation(data["scoring"])  # from the kit's scores only
    assert "(self)" not in (report.parent / "report.md").read_text()


class Asked:
    """A Terminal's self-assessment steps only (mock.self_assess), scripted."""

    def __init__(self, answers):
        self.answers, self.asked, self.shown = list(answers), [], None

    def level(self, open_rows):
        return "mid"

    def self_score(self, row, index, count):
        self.asked.append(row["dimension"])
        answer = self.answers.pop(0)
        if answer is EOFError:
            raise EOFError
        return answer

    def report_markdown(self, data):
        return "md\n"

    def self_assessed(self, data, given, path):
        self.shown = (data["recommendation"], given)


def test_a_hint_cap_holds_for_self_given_scores_too(tmp_path):
    session = mock.create_session(EXERCISE, 30, tmp_path)
    rows = [
        {
            "dimension": d,
            "score": 4 if d == "correctness" else None,
            "cap": 3 if d == "tests" else None,
            "capped_by": [],
            "why": "",
            "anchors": [],
        }
        for d in catalog.DIMENSIONS
    ]
    data = {"scoring": rows, "recommendation": mock.recommendation(rows), "exercise": EXERCISE.id}
    ui = Asked([4, 4, 4, 4, 4])
    given = mock.self_assess(session, data, ui)  # type: ignore[arg-type]
    assert given["tests"] == 3 and given["robustness"] == 4
    assert ui.shown[0]["verdict"] == rubric.recommend({d: 3 if d == "tests" else 4 for d in catalog.DIMENSIONS})[0]
    assert json.loads((session.folder / "report.json").read_text())["level"] == "mid"


def test_nothing_given_rewrites_nothing(tmp_path):
    session = mock.create_session(EXERCISE, 30, tmp_path)
    rows = [{"dimension": d, "score": None, "cap": None, "capped_by": [], "why": "", "anchors": []} for d in catalog.DIMENSIONS]
    data = {"scoring": rows, "recommendation": mock.recommendation(rows), "exercise": EXERCISE.id}
    ui = Asked([None, EOFError])
    assert mock.self_assess(session, data, ui) == {}  # type: ignore[arg-type]
    assert ui.asked == ["correctness", "robustness"] and ui.shown is None
    assert not (session.folder / "report.json").exists()
