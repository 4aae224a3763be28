"""test-tests: a test that fails only on references of another return type is named as such, with
how to compare, and counts only against known bugs of the type it passes on (README rule)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from attn_kit.base.paths import bug_files
from attn_kit.practice import testgrade
from attn_kit.render import check
from attn_kit.report import jsonout

TESTS = Path(__file__).parent / "corpus" / "candidate_tests"
pytestmark = pytest.mark.slow  # 21 implementations under pytest: several seconds


@pytest.fixture(scope="module")
def grade():
    return testgrade.grade_tests(TESTS / "list_equality.py", "mha-screen", timeout=10)


def test_a_list_comparison_is_type_sensitive_not_wrong(grade):
    assert grade.wrong == [] and grade.ok
    [t] = grade.type_sensitive
    assert t.name == "test_all_blocked_is_zero"
    assert t.fails_on == ["reference_numpy.py"] and t.passes_on == ["reference_lists.py"]
    assert "returns NumPy arrays where reference_lists.py returns plain Python lists" in t.advice
    assert "np.allclose" in t.advice and "list(result)" in t.advice and "ambiguous" in t.advice


def test_it_counts_only_against_bugs_returning_lists(grade):
    lists_bugs = {p.name for p in bug_files("mha-screen") if testgrade.returns(p) == "lists"}
    ran = {run.implementation.split("/")[-1] for run in grade.runs if run.bug}
    eligible = {run.implementation.split("/")[-1] for run in grade.runs if run.bug and "test_all_blocked_is_zero" in run.tests}
    assert eligible <= lists_bugs and ran  # never run against NumPy bugs
    assert any("not counted against" in note and "NumPy arrays" in note for note in grade.notes)


def test_rendered_and_json(grade):
    out = Console(width=100, file=io.StringIO(), color_system=None, theme=check.THEME)
    check.test_grade(grade, out)
    text = out.file.getvalue()
    assert "1 test depends on the return type" in text and "Every test passes" not in text
    data = json.loads(json.dumps(grade.to_json()))
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(jsonout.schema("test-tests")).validate(data)
    assert data["type_sensitive"][0]["fails_on"] == ["reference_numpy.py"]
