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
from attn_kit.diagnosis import compose
from attn_kit.load import catalog

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
        # the ladder's topic names the scaling bugs the toy's own features bring in (_own_bug)
        "which question, in prose and without code, points at the idea?": "How many times are the scores scaled, and by what?",
        "the idea behind the exercise, stated.": "Scale the scores once, by the square root of the width, on copies of the inputs.",
    }
    marker = re.escape(scaffold.PLACEHOLDER)

    def words(match: re.Match) -> str:
        said = match.group(1).strip()
        if said.startswith("the checks stating"):  # a headline property: the toy has none to break
            return "the toy has no weights and no mask"
        return own.get(said, f"toy: {said}" if said else "toy")

    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(marker + r":? ?([^\"'\n]*)", words, text), encoding="utf-8")


TOY_BUG = "toy-scale-by-keys-width"
OWN_BUG = f"""
[[bugs]]
id = "{TOY_BUG}"
severity = "wrong"
title = "Scores scaled by the number of keys"
symptom = "The scores are divided by the square root of the number of keys instead of the width."
fix = "Divide by the square root of the width of q, its last axis."
fix_short = "Divide by √d, the width of q's last axis"
test_idea = "With S != d, compare against softmax(q kᵀ / sqrt(d)) v by hand."
concept = "scaling"

[[family]]
form = "{TOY_BUG}"
parameter = "the length in the scale"
values = ["q.shape[0]", "k.size"]
edits = [["np.sqrt(k.shape[0])", "np.sqrt({{choice}})"]]
"""
SCALE = "scores = q @ k.T / np.sqrt(q.shape[-1])           # T×S"
# the bug files the toy's own mistake and its feature "scores" need (no-scaling and double-scaling
# apply to every exercise with scores: prompts/coverage.toml [needs])
BUG_LINES = {
    TOY_BUG: f"scores = q @ k.T / np.sqrt(k.shape[0])  # BUG({TOY_BUG}): the number of keys",
    "no-scaling": "scores = q @ k.T  # BUG(no-scaling): not scaled",
    "double-scaling": "scores = q @ k.T / np.sqrt(q.shape[-1]) / np.sqrt(q.shape[-1])  # BUG(double-scaling): twice",
}


def _own_bug(kit: Path, exercise_id: str = "toy-exercise") -> set[str]:
    """What a contributor writes for a bug only the toy makes, with a family, and the feature
    "scores": all in the exercise's own files. Returns the files written, relative to `kit`."""
    own = kit / "prompts" / "catalogue" / f"{exercise_id}.toml"
    text = own.read_text(encoding="utf-8")
    assert "\nfeatures = []" in text
    own.write_text(text.replace("\nfeatures = []", '\nfeatures = ["scores"]', 1) + OWN_BUG, encoding="utf-8")
    folder = kit / "solutions" / exercise_id
    reference = (folder / "reference_numpy.py").read_text(encoding="utf-8")
    for bug_id, line in BUG_LINES.items():
        (folder / "bugs" / f"{bug_id}.py").write_text(reference.replace(SCALE, line), encoding="utf-8")
    checks = kit / "checks" / f"{exercise_id.replace('-', '_')}.py"
    text = checks.read_text(encoding="utf-8")
    assert 'catches=("mutates-input",)' in text
    checks.write_text(
        text.replace('catches=("mutates-input",)', f'catches=("mutates-input", {", ".join(map(repr, BUG_LINES))})'), encoding="utf-8"
    )
    written = {f"solutions/{exercise_id}/bugs/{bug_id}.py" for bug_id in BUG_LINES}
    return written | {own.relative_to(kit).as_posix(), checks.relative_to(kit).as_posix()}


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
        "prompts/catalogue/toy-exercise.toml",
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


def test_an_exercise_s_own_bug_family_and_feature_change_only_its_own_files(tmp_path, monkeypatch):
    """`dev new` in a copy of the content folders (scaffold.new's roots), the placeholders filled
    in, and a bug only the new exercise makes, with a family, and a feature that brings shared
    bugs in: the catalogue loads with them and validates, and the files changed are the exercise's
    own plus what `dev update` writes (the README's tables and docs/catalogue.md)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("prompts", "solutions", "checks"):
        shutil.copytree(package_dir(name), tmp_path / name, ignore=ignore)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    before = _snapshot(tmp_path)
    roots = {name: tmp_path / name for name in ("prompts", "solutions", "checks")}
    skeleton = scaffold.new("toy-exercise", roots=roots)
    assert tmp_path / "prompts" / "catalogue" / "toy-exercise.toml" in skeleton.files
    for path in skeleton.files:
        _fill(path)
    own = _own_bug(tmp_path)

    # the catalogue as the loaders merge it: the toy's own bug, its family and its feature
    prompts = tmp_path / "prompts"
    assert catalog.load_catalogue_bugs(prompts)[TOY_BUG].title == "Scores scaled by the number of keys"
    features, needs = catalog.load_coverage(prompts)
    assert features["toy-exercise"] == ("scores",) and needs[TOY_BUG] == ("toy-exercise",)
    assert [e["form"] for e in catalog.own_families(prompts) if e["exercise"] == "toy-exercise"] == [TOY_BUG]

    # dev check over the copy (its families read the copy's bug files; its suites are read from
    # the copy's files, not imported: the slow test below grades the toy in a scratch kit)
    solutions = tmp_path / "solutions"
    monkeypatch.setattr(compose, "bug_files", lambda e: sorted((solutions / e / "bugs").glob("*.py")))
    monkeypatch.setattr(compose, "reference_files", lambda e: sorted((solutions / e).glob("reference_*.py")))
    compose.forms.cache_clear()
    try:
        content = check.Content(prompts, solutions, checks_dir=tmp_path / "checks")
        assert check.applicable_bugs(content, "toy-exercise") == {"mutates-input", "no-scaling", "double-scaling", TOY_BUG}
        textbook = next(f for f in compose.forms("toy-exercise") if f.bug == TOY_BUG)
        entry = next(e for e in catalog.own_families(prompts) if e["form"] == TOY_BUG)
        assert [f.variant for f in compose.family_forms_of(entry, textbook)] == [
            "the length in the scale: q.shape[0]",
            "the length in the scale: k.size",
        ]
        stale = [str(p) for p in check.run(content).problems]
        assert stale == [
            "README.md: out of date (the 'exercises' table differs): run attn-kit dev update",
            "README.md: out of date (the 'follow-ups' table differs): run attn-kit dev update",
            "README.md: out of date (the 'properties' table differs): run attn-kit dev update",
            "docs/catalogue.md: out of date (the known bugs of each exercise): run attn-kit dev update",
        ], stale
        assert check.update_readme(content) == ["exercises", "follow-ups", "properties"]
        assert check.update_catalogue_doc(content)
        result = check.run(content)
        assert result.ok, "\n".join(map(str, result.problems))
    finally:
        compose.forms.cache_clear()

    doc = (tmp_path / "docs" / "catalogue.md").read_text(encoding="utf-8")
    assert f"| `{TOY_BUG}` | Scores scaled by the number of keys |" in doc and "## `toy-exercise`: Toy attention" in doc
    after = _snapshot(tmp_path)
    changed = {name for name in after if before.get(name) != after[name]} | set(before) - set(after)
    mine = {p.relative_to(tmp_path).as_posix() for p in skeleton.files} | own
    assert changed == mine | {"README.md", "docs/catalogue.md"}, changed ^ (mine | {"README.md", "docs/catalogue.md"})
    assert all(
        name.startswith(
            ("prompts/exercises/toy-exercise.", "prompts/catalogue/toy-exercise.", "checks/toy_exercise.", "solutions/toy-exercise/")
        )
        for name in mine
    )


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
    """README's "Adding an exercise", followed in a scratch checkout: `dev new`, fill in (with a
    bug only the new exercise makes, a family of it and a feature, in its own catalogue file),
    `dev update`, `dev check`. Only the new exercise's files, the README's generated tables and
    docs/catalogue.md change, and the tests that iterate over every exercise pass with the new
    one among them."""
    kit = site / "attn_kit"
    shutil.copy(ROOT / "README.md", kit / "README.md")  # beside prompts/, as in a checkout
    (kit / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "catalogue.md", kit / "docs" / "catalogue.md")
    before = _snapshot(kit)
    made = _run(site, "dev", "new", "toy-exercise")
    assert made.returncode == 0, made.stdout + made.stderr
    created = {Path(line[2:]) for line in made.stdout.splitlines() if line.startswith("+ ")}
    for path in created:
        _fill(path)
    own = _own_bug(kit)

    stale = _run(site, "dev", "check")
    assert stale.returncode == 1
    assert [line for line in stale.stdout.splitlines() if line.startswith("✗")] == [
        f"✗ README.md: out of date (the '{name}' table differs): run attn-kit dev update"
        for name in ("exercises", "follow-ups", "properties")
    ] + ["✗ docs/catalogue.md: out of date (the known bugs of each exercise): run attn-kit dev update"]
    updated = _run(site, "dev", "update")
    assert updated.returncode == 0 and "rewrote the exercises, follow-ups, properties table(s)" in updated.stdout
    assert "✓ docs/catalogue.md: rewrote the known bugs of each exercise" in updated.stdout
    checked = _run(site, "dev", "check")
    assert checked.returncode == 0 and "✓ content is consistent" in checked.stdout, checked.stdout + checked.stderr

    after = _snapshot(kit)
    changed = {name for name in after if before.get(name) != after[name]} | set(before) - set(after)
    assert changed == {p.relative_to(kit).as_posix() for p in created} | own | {"README.md", "docs/catalogue.md"}
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
