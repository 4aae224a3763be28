"""`attn-kit grade`: finding submissions, grading them as `check` does, and every output format
validated against its platform's documented shape."""

from __future__ import annotations

import csv
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from attn_kit.base.errors import UsageError
from attn_kit.base.paths import solutions_dir
from attn_kit.batch import outputs, run
from attn_kit.cli.grade import parse_outputs

from helpers import attn_kit, check_json

jsonschema = pytest.importorskip("jsonschema")

EXERCISE = "mha-screen"
SEED = 4242
SOLUTIONS = solutions_dir(EXERCISE)

# Gradescope's results.json, from its documented fields ("Autograder Specifications": top level
# score, execution_time, output, output_format, test_output_format, test_name_format, visibility,
# stdout_visibility, extra_data, tests, leaderboard; each test score, max_score, status, name,
# name_format, number, output, output_format, tags, visibility, extra_data).
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
GRADESCOPE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["tests"],
    "anyOf": [{"required": ["score"]}, {"properties": {"tests": {"items": {"required": ["score"]}}}}],
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number"},
        "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "test_output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "test_name_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number"},
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "name_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
                    "number": {"type": "string"},
                    "output": {"type": "string"},
                    "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": VISIBILITY,
                    "extra_data": {"type": "object"},
                },
            },
        },
    },
}

# PrairieLearn's external grader results.json, from its documented fields (gradable, score in
# 0-1, message, output, format_errors, images, tests; each test name, description, points,
# max_points, output, message, images).
PRAIRIELEARN = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["gradable", "score"],
    "additionalProperties": False,
    "properties": {
        "gradable": {"type": "boolean"},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "message": {"type": "string"},
        "output": {"type": "string"},
        "format_errors": {"type": "object"},
        "images": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "points": {"type": "number", "minimum": 0},
                    "max_points": {"type": "number", "minimum": 0},
                    "output": {"type": "string"},
                    "message": {"type": "string"},
                    "images": {"type": "array"},
                },
            },
        },
    },
}


def validate(obj: dict, schema: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(obj)


def make_folder(root: Path) -> Path:
    """Six submissions in both layouts: files, folders, a syntax error and an empty folder."""
    folder = root / "submissions"
    folder.mkdir()
    shutil.copy(SOLUTIONS / "reference_numpy.py", folder / "alice.py")
    shutil.copy(SOLUTIONS / "bugs" / "no-scaling.py", folder / "bob_smith.py")
    (folder / "carol").mkdir()
    shutil.copy(SOLUTIONS / "reference_lists.py", folder / "carol" / "solution.py")
    (folder / "carol" / "helper.py").write_text("X = 1\n")
    (folder / "dave").mkdir()
    shutil.copy(SOLUTIONS / "bugs" / "causal-off-by-one.py", folder / "dave" / "attention.py")
    (folder / "dave" / "test_attention.py").write_text("def test_nothing():\n    assert True\n")
    (folder / "erin.py").write_text("def multi_head_attention(x:\n")
    (folder / "frank").mkdir()
    (folder / "__pycache__").mkdir()
    (folder / "notes.txt").write_text("not a submission\n")
    return folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One `attn-kit grade` run writing every format; the same results written again with
    hidden_details (from the JSON record: Batch.from_json)."""
    root = tmp_path_factory.mktemp("grade")
    folder = make_folder(root)
    out = root / "plain"
    proc = attn_kit(
        "grade",
        folder,
        "--exercise",
        EXERCISE,
        "--seed",
        SEED,
        "--jobs",
        2,
        "--out",
        f"csv={out / 'grades.csv'}",
        "--out",
        f"json={out / 'grades.json'}",
        "--out",
        f"junit={out / 'report.xml'}",
        "--out",
        f"gradescope={out / 'gradescope'}",
        "--out",
        f"prairielearn={out / 'prairielearn'}",
        timeout=300,
    )
    details = root / "details"
    again = run.Batch.from_json(json.loads((out / "grades.json").read_text()))
    for fmt, path in (("junit", "report.xml"), ("gradescope", "gradescope"), ("prairielearn", "prairielearn")):
        outputs.write(again, fmt, details / path, hidden_details=True)
    return folder, {"plain": (out, proc), "details": (details, None)}


NAMES = ["alice", "bob_smith", "carol", "dave", "erin", "frank"]


def test_find_submissions_follows_the_documented_rules(tmp_path):
    folder = make_folder(tmp_path)
    found = {s.name: s for s in run.find_submissions(folder)}
    assert list(found) == NAMES
    assert found["carol"].path == folder / "carol" / "solution.py"  # solution.py beats helper.py
    assert found["dave"].path == folder / "dave" / "attention.py"  # test_*.py does not count
    assert found["frank"].path is None and "no .py file" in found["frank"].problem
    (folder / "carol" / "solution.py").unlink()
    (folder / "carol" / "other.py").write_text("def multi_head_attention(x, params, num_heads):\n    return x\n")
    carol = run.find_submissions(folder / "carol", single=True)[0]
    assert carol.path is None and "2 .py files" in carol.problem
    (folder / "carol" / "helper.py").write_text("# attn-kit: mha-screen\nX = 1\n")
    assert run.find_submissions(folder / "carol", single=True)[0].path == folder / "carol" / "helper.py"
    assert run.find_submissions(folder / "alice.py")[0].name == "alice"
    with pytest.raises(UsageError):
        run.find_submissions(tmp_path / "nowhere")
    with pytest.raises(UsageError):
        run.find_submissions(folder / "frank")


def test_out_options_pair_formats_with_paths():
    assert parse_outputs((), ("csv=a.csv", "junit=r.xml")) == [("csv", Path("a.csv")), ("junit", Path("r.xml"))]
    assert parse_outputs(("gradescope",), ("results.json", "b.csv")) == [("gradescope", Path("results.json")), ("csv", Path("b.csv"))]
    for formats, outs in (((), ("results.txt",)), (("json",), ()), ((), ("json=",))):
        with pytest.raises(UsageError):
            parse_outputs(formats, outs)


def test_the_table_and_the_exit_status(graded):
    _, runs = graded
    _, proc = runs["plain"]
    assert proc.returncode == 1, proc.stderr  # some submissions fail
    assert "Traceback" not in proc.stderr
    assert f"seed {SEED}" in proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.split()}
    assert "47/47" in rows["alice"] and "47/47" in rows["carol"]
    assert "no-scaling" in rows["bob_smith"] and "causal-off-by-one" in rows["dave"]
    assert "unloadable" in rows["erin"] and "missing" in rows["frank"]


def test_json_matches_its_schema_and_each_report_is_the_check_object(graded):
    from attn_kit.report import jsonout

    out, _ = graded[1]["plain"]
    data = json.loads((out / "grades.json").read_text())
    validate(data, json.loads(jsonout.schema_path("grade").read_text()))
    assert data["seed"] == SEED and [s["name"] for s in data["submissions"]] == NAMES
    for sub in data["submissions"]:
        if sub["report"] is not None:
            validate(sub["report"], jsonout.schema("check"))
            assert sub["report"]["seed"] == SEED
    by_name = {s["name"]: s for s in data["submissions"]}
    assert by_name["bob_smith"]["bugs"] == ["no-scaling"] and by_name["alice"]["passed"]
    assert by_name["erin"]["state"] == "unloadable" and "SyntaxError" in by_name["erin"]["error"]


@pytest.mark.slow
def test_batch_grades_equal_lone_checks(graded):
    """Same seed, same file: the batch's report is `check --json`'s, field for field."""
    folder, runs = graded
    data = json.loads((runs["plain"][0] / "grades.json").read_text())
    for sub in data["submissions"]:
        if sub["name"] in ("alice", "bob_smith", "dave"):
            alone, _ = check_json(sub["path"], "--exercise", EXERCISE, "--seed", str(SEED))
            assert sub["report"] == alone, sub["name"]


def test_csv_has_every_check_of_every_submission(graded):
    out, _ = graded[1]["plain"]
    data = json.loads((out / "grades.json").read_text())
    rows = list(csv.DictReader((out / "grades.csv").open(newline="")))
    assert [r["submission"] for r in rows] == NAMES
    for row, sub in zip(rows, data["submissions"]):
        assert int(row["points"]) == (sub["report"]["score"]["points"] if sub["report"] else 0)
        assert row["seed"] == str(SEED)
        for check in (sub["report"] or {"checks": []})["checks"]:
            assert row[f"{check['id']}:status"] == check["status"]
            assert row[f"{check['id']}:points"] == str(check["points"])
            assert row[f"{check['id']}:bug"] == (check["bug"] or "")
    assert rows[1]["bugs"] == "no-scaling" and "no-scaling" in rows[1].values()


def test_junit_has_a_suite_per_submission_and_a_case_per_check(graded):
    out, _ = graded[1]["plain"]
    data = json.loads((out / "grades.json").read_text())
    root = ET.parse(out / "report.xml").getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == NAMES
    total = 0
    for suite, sub in zip(suites, data["submissions"]):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        total += len(cases)
        props = {p.get("name"): p.get("value") for p in suite.find("properties")}
        assert props["seed"] == str(SEED)
        if sub["report"] is None:
            assert [c.get("name") for c in cases] == ["load"] and cases[0].find("error") is not None
            continue
        assert [c.get("name") for c in cases] == [c["id"] for c in sub["report"]["checks"]]
        for case, check in zip(cases, sub["report"]["checks"]):
            failure = case.find("failure")
            assert (failure is not None) == (check["status"] == "fail")
            if failure is not None and check["public"]:
                assert check["message"].splitlines()[0] == failure.get("message")
        assert int(suite.get("failures")) == sum(c["status"] == "fail" for c in sub["report"]["checks"])
    assert int(root.get("tests")) == total


def test_gradescope_and_prairielearn_match_their_documented_shapes(graded):
    out, _ = graded[1]["plain"]
    data = {s["name"]: s for s in json.loads((out / "grades.json").read_text())["submissions"]}
    for name in NAMES:
        gs = json.loads((out / "gradescope" / f"{name}.json").read_text())
        pl = json.loads((out / "prairielearn" / f"{name}.json").read_text())
        validate(gs, GRADESCOPE)
        validate(pl, PRAIRIELEARN)
        report = data[name]["report"]
        points = report["score"]["points"] if report else 0
        assert gs["score"] == points == sum(t["score"] for t in gs["tests"])
        assert pl["score"] == pytest.approx(points / 47)
        assert str(SEED) in gs["output"] and str(SEED) in pl["output"]
    assert not json.loads((out / "prairielearn" / "erin.json").read_text())["gradable"]
    assert json.loads((out / "prairielearn" / "bob_smith.json").read_text())["gradable"]


def test_hidden_cases_show_only_their_names_unless_asked(graded):
    """A failing hidden check's message (its values) is withheld by default; a public example's
    message is shown in full; --hidden-details shows both."""
    plain, details = graded[1]["plain"][0], graded[1]["details"][0]
    report = next(s for s in json.loads((plain / "grades.json").read_text())["submissions"] if s["name"] == "bob_smith")["report"]
    hidden = [c for c in report["checks"] if c["status"] == "fail" and not c["public"]]
    public = [c for c in report["checks"] if c["status"] == "fail" and c["public"]]
    assert hidden and public
    for folder, shown in ((plain, False), (details, True)):
        text = (
            (folder / "gradescope" / "bob_smith.json").read_text()
            + (folder / "report.xml").read_text()
            + (folder / "prairielearn" / "bob_smith.json").read_text()
        )
        for check in hidden:
            assert (json.dumps(check["message"])[1:-1][:60] in text) == shown, check["id"]
        for check in public:
            assert json.dumps(check["message"])[1:-1][:60] in text
        assert "hidden case" in text


@pytest.mark.slow
def test_a_run_without_seed_prints_and_records_one(tmp_path):
    shutil.copy(SOLUTIONS / "reference_numpy.py", tmp_path / "only.py")
    proc = attn_kit(
        "grade",
        tmp_path / "only.py",
        "-e",
        EXERCISE,
        "--out",
        f"json={tmp_path / 'g.json'}",
        "--out",
        f"gradescope={tmp_path / 'results.json'}",
    )
    assert proc.returncode == 0, proc.stderr
    seed = json.loads((tmp_path / "g.json").read_text())["seed"]
    assert f"seed {seed} " in proc.stderr
    assert json.loads((tmp_path / "results.json").read_text())["extra_data"]["seed"] == seed


def test_misuse_is_exit_2_without_a_traceback(tmp_path):
    for args in (
        ("grade", tmp_path / "none", "-e", EXERCISE),
        ("grade", tmp_path, "-e", "no-such-exercise"),
        ("grade", tmp_path, "-e", EXERCISE, "--out", "x.txt"),
    ):
        proc = attn_kit(*args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and "Error" in proc.stderr, proc.stderr


def test_the_json_record_writes_the_same_files_again(graded, tmp_path):
    out, _ = graded[1]["plain"]
    again = run.Batch.from_json(json.loads((out / "grades.json").read_text()))
    for fmt, name in (("csv", "grades.csv"), ("junit", "report.xml")):
        outputs.write(again, fmt, tmp_path / name)
        assert (tmp_path / name).read_text() == (out / name).read_text()


def test_gradeout_write_rejects_unknown_formats(tmp_path):
    with pytest.raises(UsageError, match="no output format named 'yaml'"):
        outputs.write(run.Batch(EXERCISE, 1, []), "yaml", tmp_path / "x")


@pytest.mark.slow
def test_the_terminal_shows_progress_then_a_table_that_fits_80_columns(tmp_path):
    """In a real pseudo-terminal at 80x24: the progress bar (stderr is a terminal) and then the
    table, every line within 80 columns, a long submission name folded rather than cut."""
    import os
    import re
    import sys

    import pexpect

    long_name = "a_candidate_with_a_remarkably_long_submission_file_name_for_this_table"
    shutil.copy(SOLUTIONS / "reference_numpy.py", tmp_path / f"{long_name}.py")
    shutil.copy(SOLUTIONS / "bugs" / "no-scaling.py", tmp_path / "bob.py")
    env = dict(os.environ, NO_COLOR="1", TERM="xterm")
    env.pop("COLUMNS", None)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", "grade", str(tmp_path), "-e", EXERCISE, "--seed", "3", "--jobs", "1"],
        env=env,
        encoding="utf-8",
        timeout=120,
        dimensions=(24, 80),
    )
    raw = child.read()
    child.close()
    assert child.exitstatus == 1
    assert "grading" in raw  # the progress bar was drawn
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).replace("\r\n", "\n")
    table = text[text.index("Submission") :]
    lines = [line.rstrip("\r") for line in table.splitlines()]
    assert all(len(line) <= 80 for line in lines), lines
    assert any(line.startswith("bob ") and "26/47" in line and "no-scaling" in line for line in lines)
    assert long_name not in table and "".join(line.split()[0] for line in lines[1:3]).startswith(long_name[:40])
    assert "seed 3" in text
