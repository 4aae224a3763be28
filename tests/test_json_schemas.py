"""Every --json output matches the JSON Schema the package ships, errors included, and error
objects keep the success objects' shape (exercise from the header, seed, score.points)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from attn_kit.base.paths import solutions_dir
from attn_kit.cli import cli
from attn_kit.grading import pipeline
from attn_kit.practice import bench, testgrade
from attn_kit.report import jsonout

from helpers import strict_json

jsonschema = pytest.importorskip("jsonschema")
ROOT = Path(__file__).resolve().parents[1]


def valid(name: str, obj: dict) -> None:
    schema = jsonout.schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(obj)


def run_json(*args) -> tuple[dict, int]:
    result = CliRunner().invoke(cli, [*map(str, args)])
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.output
    return strict_json(lines[0]), result.exit_code


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("json") / "solution.py"
    path.write_text("# attn-kit: mha-screen\nimport (\n", encoding="utf-8")
    return path


def test_schemas_ship_in_the_package_and_are_valid():
    for name in jsonout.SCHEMAS:
        assert jsonout.schema_path(name).is_file()
        jsonschema.Draft202012Validator.check_schema(jsonout.schema(name))
    assert '"attn_kit" = ["schemas/*.json", "schemas/*.xsd"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_check_output_matches_its_schema():
    report = pipeline.grade(solutions_dir("mha-screen") / "bugs" / "no-scaling.py", pipeline.Options(seed=3))
    data = json.loads(json.dumps(report.to_json()))
    valid("check", data)
    assert data["diagnosis"] and any(c["bug"] == "no-scaling" for c in data["checks"])


@pytest.mark.slow  # 21 implementations under pytest: a few seconds
def test_test_tests_output_matches_its_schema(tmp_path):
    # paged-attention: the exercise with the fewest implementations to run the tests against
    tests = tmp_path / "my_tests.py"
    tests.write_text(
        "from solution import paged_attention\n\n\ndef test_callable():\n    assert callable(paged_attention)\n\n\n"
        "def test_believes_it_is_missing():\n    assert paged_attention is None, 'a wrong expectation'\n"
    )
    grade = testgrade.grade_tests(tests, timeout=10)
    data = json.loads(json.dumps(grade.to_json()))
    valid("test-tests", data)
    assert data["exercise"] == "paged-attention" and data["wrong_tests"] == ["test_believes_it_is_missing"] and data["bugs"]


def test_bench_output_matches_its_schema():
    result = bench.run(solutions_dir("mha-screen") / "reference_lists.py", bench.Options(sizes=(8, 16), repeats=1, budget=10))
    data = json.loads(json.dumps(result.to_json()))
    valid("bench", data)
    assert data["sizes"] == [8, 16]


@pytest.mark.parametrize("command", ["check", "test-tests", "bench"])
def test_error_objects_keep_the_success_shape(broken, command):
    extra = ["--seed", "7"] if command == "check" else []
    data, code = run_json(command, broken, "--json", *extra)
    assert code == 1
    assert "SyntaxError" in data["error"]
    valid(command, data)  # the command's own shape, with nothing in it
    valid("error", data)
    assert data["exercise"] == "mha-screen"  # the header names it
    assert data["path"] == str(broken)
    if command == "check":
        assert data["seed"] == 7 and data["score"]["points"] == 0 and data["score"]["max_points"] == 0


def test_check_error_object_names_the_seed_it_would_have_used(tmp_path):
    data, code = run_json("check", tmp_path / "missing.py", "--json")
    assert code == 2 and "no such file" in data["error"]
    valid("check", data)
    assert isinstance(data["seed"], int) and data["exercise"] is None


def test_check_statuses_are_the_schemas_strings():
    """CheckStatus is a StrEnum whose values are exactly the schema's status strings, and a result
    built with it serialises to them (the JSON and the stored history keep the same strings)."""
    from attn_kit.report.results import CheckResult, CheckStatus

    items = jsonout.schema("check")["properties"]["checks"]["items"]["properties"]
    assert [s.value for s in CheckStatus] == items["status"]["enum"]
    for status in CheckStatus:
        text = json.dumps(CheckResult("c", "t", status, 0, 1).to_json())
        assert json.loads(text)["status"] == status.value and type(json.loads(text)["status"]) is str
        valid_item = jsonschema.Draft202012Validator(jsonout.schema("check")["properties"]["checks"]["items"])
        assert valid_item.is_valid(json.loads(text))


def test_non_finite_numbers_are_null_in_every_json_output():
    """jsonout.dumps (what every --json prints through) writes strict JSON at any depth."""
    text = jsonout.dumps({"a": [float("nan"), 1.5, (float("inf"),)], "b": {"c": -float("inf")}})
    assert strict_json(text) == {"a": [None, 1.5, [None]], "b": {"c": None}}


def test_one_error_builder():
    """jsonout.error_json is the one builder of the JSON error object; no other module defines one."""
    builders = [
        path.name for path in sorted((ROOT / "kit").rglob("*.py")) if re.search(r"def \w*error_json", path.read_text(encoding="utf-8"))
    ]
    assert builders == ["jsonout.py"]


def test_users_are_pointed_at_shipped_docs_not_spec_md():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    help_text = CliRunner().invoke(cli, ["check", "--help"]).output
    assert "SPEC.md" not in readme and "SPEC.md" not in help_text
    assert "schemas/check.schema.json" in re.sub(r"\s+", "", help_text).replace("attn_kit/", "")
    for name in ("check", "test-tests", "bench", "error"):
        assert f"{name}.schema.json" in readme


@pytest.mark.parametrize("command, option", [("check", ["--seed", "abc"]), ("bench", ["--budget", "-1"])])
def test_a_bad_option_value_under_json_is_the_commands_error_object(broken, command, option):
    """Option parsing fails in attn-kit's main(), before the command runs: still one JSON object,
    in the command's shape, exit 2 (a usage error), and no traceback."""
    from helpers import attn_kit

    proc = attn_kit(command, broken, "--json", *option)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert option[0] in data["error"]
    valid(command, data)
    valid("error", data)


def test_a_device_under_json_is_an_error_object_without_reading_it():
    """The error object looks for the file's `# attn-kit:` header: never in a device or a FIFO."""
    from helpers import attn_kit

    proc = attn_kit("check", "/dev/zero", "--json", timeout=30)
    assert proc.returncode == 2 and "a device" in json.loads(proc.stdout)["error"]
