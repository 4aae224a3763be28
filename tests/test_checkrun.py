"""The check workflow as a library object: practice.checkrun.run grades, adds what the request
asks for, shows it through a Display and records it, in one order, for any front end."""

from __future__ import annotations

import contextlib
from pathlib import Path

from attn_kit.base.paths import solutions_dir
from attn_kit.grading import pipeline
from attn_kit.practice import checkrun

NO_SCALING = solutions_dir("mha-screen") / "bugs" / "no-scaling.py"
REFERENCE = solutions_dir("mha-screen") / "reference_lists.py"


class Recorder:
    """A Display that notes each step it is asked to show."""

    def __init__(self):
        self.steps: list[tuple] = []

    def progress(self, file):
        self.steps.append(("progress", Path(file).name))
        return contextlib.nullcontext(lambda text: self.steps.append(("status", text)))

    def locate_progress(self, budget):
        self.steps.append(("locate_progress", budget))
        return contextlib.nullcontext(None)

    def json(self, data):
        self.steps.append(("json", sorted(data)))

    def report(self, report, first):
        self.steps.append(("report", report.passed, first))

    def located(self, located, report, fix):
        self.steps.append(("located", located.stopped, fix))

    def locate_pointer(self, report, command):
        self.steps.append(("locate_pointer", command))

    def repro_written(self, paths):
        self.steps.append(("repro", len(paths)))

    def tests(self, grade, full):
        self.steps.append(("tests", full))

    def recorded(self, report, source):
        self.steps.append(("recorded", source))

    def names(self) -> list[str]:
        return [s[0] for s in self.steps if s[0] != "status"]


def test_a_failing_run_is_graded_shown_pointed_at_locate_and_recorded(tmp_path):
    shown = Recorder()
    request = checkrun.CheckRequest(NO_SCALING, pipeline.Options(seed=3), repro=tmp_path / "repro", first=False)
    outcome = checkrun.run(request, shown)
    assert not outcome.passed and outcome.report.diagnosis[0].bug == "no-scaling"
    assert shown.names() == ["progress", "report", "locate_pointer", "repro", "recorded"]
    assert ("report", False, False) in shown.steps and ("recorded", "check") in shown.steps
    assert ("locate_pointer", f"attn-kit check {NO_SCALING} --seed 3 --locate") in shown.steps
    assert outcome.written and all(p.exists() for p in outcome.written)
    assert ("repro", len(outcome.written)) in shown.steps


def test_the_first_screen_names_locate_itself_and_json_runs_are_not_recorded():
    shown = Recorder()
    checkrun.run(checkrun.CheckRequest(NO_SCALING, pipeline.Options(seed=3)), shown)
    assert shown.names() == ["progress", "report", "repro", "recorded"]  # no pointer: the first screen's last line has it
    as_json = Recorder()
    outcome = checkrun.run(checkrun.CheckRequest(REFERENCE, pipeline.Options(seed=3), as_json=True), as_json)
    assert outcome.passed and as_json.names() == ["progress", "json"]
    assert ("json", sorted(outcome.report.to_json())) in as_json.steps
