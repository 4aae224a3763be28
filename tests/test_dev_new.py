"""`attn-kit dev new`: a contributor's path to a new exercise, in a scratch copy of the kit.

The copy is laid out as the installed package (attn_kit/ with checks/, solutions/ and prompts/
inside) and put first on PYTHONPATH, so the commands below write to and read from the copy only.
The contributor's steps (the README's "Adding an exercise"): `dev new`, fill in every placeholder,
`dev update` (when a README sits beside the content, as in a checkout), `dev check`, then grade;
and the suite's tests over every exercise pass with the new one among them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attn_kit.base.errors import UsageError
from attn_kit.base.paths import package_dir
from attn_kit.dev import check, scaffold
from attn_kit.dev import readme as readme_tables

CLI_TIMEOUT = 120
SUITE_TIMEOUT = 900  # the content tests, in one subprocess


def _scratch_kit(root: Path) -> Path:
    """A copy of the kit and its content under root/attn_kit; returns root/attn_kit."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    kit = shutil.copytree(Path(check.__file__).parents[1], root / "attn_kit", ignore=ignore, dirs_exist_ok=True)
    for name in ("checks", "solutions", "prompts"):
        if not (kit / name).is_dir() or package_dir(name) != kit / name:
            shutil.rmtree(kit / name, ignore_errors=True)
            shutil.copytree(package_dir(name), kit / name, ignore=ignore)
    return kit


def _run(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site), ATTN_KIT_HOME=str(site / "home"))
    return subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", *args], cwd=site, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT
    )


def _fill(path: Path) -> None:
    """What a contributor writes in place of each placeholder: a toy exercise's own words."""
    own = {
        "the title, as `attn-kit list` shows it": "Toy attention",
        "the title": "Toy attention",
        "one sentence saying what the candidate writes.": "Single-head attention over a few keys.",
        # the questions are on the concept of the skeleton's bug (hygiene): they say so
        "a question an interviewer asks about this exercise": "Why must q not be scaled in place?",
        "a question on its cost in time and memory": "What does a copy of an argument cost?",
        "a question on an edge case": "Which argument could the caller reuse after the call?",
    }
    marker = re.escape(scaffold.PLACEHOLDER)

    def words(match: re.Match) -> str:
        said = match.group(1).strip()
        if said.startswith("the checks stating"):  # a headline property: the toy has none to break
            return "the toy has no weights and no mask"
        return own.get(said, f"toy: {said}" if said else "toy")

    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(marker + r":? ?([^\"'\n]*)", words, text), encoding="utf-8")


@pytest.fixture
def site(tmp_path) -> Path:
    _scratch_kit(tmp_path)
    return tmp_path


def _snapshot(kit: Path) -> dict[str, bytes]:
    return {str(p.relative_to(kit)): p.read_bytes() for p in sorted(kit.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.slow
def test_a_new_exercise_from_dev_new_passes_dev_check_and_grades(site):
    kit = site / "attn_kit"
    before = _snapshot(kit)
    made = _run(site, "dev", "new", "toy-exercise")
    assert made.returncode == 0, made.stdout + made.stderr
    created = {Path(line[2:]) for line in made.stdout.splitlines() if line.startswith("+ ")}
    assert {p.relative_to(kit).as_posix() for p in created} == {
        "prompts/exercises/toy-exercise.toml",
        "checks/toy_exercise.py",
        "solutions/toy-exercise/reference_numpy.py",
        "solutions/toy-exercise/bugs/mutates-input.py",
    }

    # before filling in: `dev check`'s placeholder rule names every placeholder, where and what
    content = check.Content(kit / "prompts", kit / "solutions", checks_dir=kit / "checks")
    unfilled = [str(p) for p in check.run(content, [check.no_placeholders_left]).problems]
    assert "prompts/exercises/toy-exercise.toml: line 5: fill in the placeholder: the title, as `attn-kit list` shows it" in unfilled, (
        unfilled
    )
    assert any(p.startswith("checks/toy_exercise.py: line 3: fill in the placeholder: say what the checks feed") for p in unfilled), (
        unfilled
    )
    assert any(
        re.fullmatch(
            r"solutions/toy-exercise/bugs/mutates-input.py: line \d+: fill in the placeholder: make "
            r"this file the reference .*",
            p,
        )
        for p in unfilled
    ), unfilled
    assert {p.split(":")[0] for p in unfilled} == {p.relative_to(kit).as_posix() for p in created}

    for path in created:
        _fill(path)
    checked = _run(site, "dev", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "✓ content is consistent" in checked.stdout

    reference = kit / "solutions" / "toy-exercise" / "reference_numpy.py"
    passed = _run(site, "check", str(reference), "--json")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    failed = _run(site, "check", str(kit / "solutions" / "toy-exercise" / "bugs" / "mutates-input.py"), "--json")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert '"mutates-input"' in failed.stdout

    after = _snapshot(kit)
    changed = {name for name in after if before.get(name) != after[name]} | set(before) - set(after)
    assert changed == {p.relative_to(kit).as_posix() for p in created}

    refused = _run(site, "dev", "update")  # an installed copy has no README to update
    assert refused.returncode == 2 and "an installed copy" in refused.stderr, refused.stdout + refused.stderr


def test_dev_new_refuses_a_taken_or_invalid_id(site):
    kit = site / "attn_kit"
    before = _snapshot(kit)
    proc = _run(site, "dev", "new", "gqa")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "Traceback" not in proc.stderr
    assert "exercise 'gqa' already exists" in proc.stderr
    roots = {name: kit / name for name in ("prompts", "solutions", "checks")}
    for exercise_id, bug, said in (
        ("Toy_Exercise", "no-scaling", "'Toy_Exercise' is not a valid exercise id"),
        ("2-toy", "no-scaling", "'2-toy' is not a valid exercise id"),
        ("toy", "no-such-bug", "'no-such-bug' is not a bug id"),
    ):
        with pytest.raises(UsageError, match=re.escape(said)) as raised:
            scaffold.new(exercise_id, bug=bug, roots=roots)
        assert raised.value.exit_code == 2
    assert _snapshot(kit) == before, "a refused `dev new` writes nothing"


ROOT = Path(__file__).resolve().parents[1]
# Test files that iterate over every exercise: run whole (their tests loop over the exercises
# inside), or only their cases of the new exercise (they are parametrised by exercise, and their
# other cases are what the rest of the suite runs).
WHOLE = ("test_content_links.py", "test_content_questions.py", "test_devcheck.py")
ITS_CASES = (
    "test_catalogue.py",
    "test_content.py",
    "test_content_render.py",
    "test_coverage.py",
    "test_diagnosis_families.py",
    "test_rubric.py",
    "test_testgrade.py",
)


def _pytest(site: Path, files: tuple[str, ...], *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(site), ATTN_KIT_HOME=str(site / "home"))
    tests = [str(ROOT / "tests" / name) for name in files]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-v", *args, *tests],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT,
    )


@pytest.mark.slow  # a scratch kit, four commands and the content tests in subprocesses
def test_the_contributor_s_path_touches_only_the_new_files_and_passes_the_suite(site):
    """README's "Adding an exercise", followed in a scratch checkout: `dev new`, fill in, `dev
    update`, `dev check`. Only the new files and the README's generated tables change, and the
    tests that iterate over every exercise pass with the new one among them."""
    kit = site / "attn_kit"
    shutil.copy(ROOT / "README.md", kit / "README.md")  # beside prompts/, as in a checkout
    before = _snapshot(kit)
    made = _run(site, "dev", "new", "toy-exercise")
    assert made.returncode == 0, made.stdout + made.stderr
    created = {Path(line[2:]) for line in made.stdout.splitlines() if line.startswith("+ ")}
    for path in created:
        _fill(path)

    stale = _run(site, "dev", "check")
    assert stale.returncode == 1
    assert [line for line in stale.stdout.splitlines() if line.startswith("✗")] == [
        f"✗ README.md: out of date (the '{name}' table differs): run attn-kit dev update"
        for name in ("exercises", "follow-ups", "properties")
    ]
    updated = _run(site, "dev", "update")
    assert updated.returncode == 0 and "rewrote the exercises, follow-ups, properties table(s)" in updated.stdout
    checked = _run(site, "dev", "check")
    assert checked.returncode == 0 and "✓ content is consistent" in checked.stdout, checked.stdout + checked.stderr

    after = _snapshot(kit)
    changed = {name for name in after if before.get(name) != after[name]} | set(before) - set(after)
    assert changed == {p.relative_to(kit).as_posix() for p in created} | {"README.md"}
    readme = (kit / "README.md").read_text(encoding="utf-8")
    outside = readme_tables.REGION.sub("", readme)
    assert outside == readme_tables.REGION.sub("", before["README.md"].decode("utf-8")), (
        "dev update changed the README outside its marked regions"
    )
    assert "| `toy-exercise` | toy: what the candidate builds" in readme and "| toy-exercise |" in readme

    only_toy = " or ".join(ITS_CASES)  # with .py: test_content.py is not a part of test_content_links.py
    run = _pytest(site, WHOLE + ITS_CASES, "-k", f"toy-exercise or toy_exercise or not ({only_toy})")
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    ran = re.findall(r"tests/(test_\w+)\.py::(\S+) PASSED", run.stdout)
    assert {module + ".py" for module, _ in ran} == set(WHOLE + ITS_CASES), "a file ran no test"
    assert all("toy" in name for module, name in ran if module + ".py" in ITS_CASES), ran
    assert sum("toy" in name for _, name in ran) >= 20, "the tests did not see the new exercise"
