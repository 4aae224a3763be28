"""`attn-kit dev check`: the bundled content passes, and a deliberately broken copy of it fails,
with one problem per kind of breakage, each naming the file."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from attn_kit.base.errors import UsageError
from attn_kit.base.paths import package_dir
from attn_kit.cli import cli
from attn_kit.dev import check as devcheck
from attn_kit.load import catalog

from helpers import attn_kit


@pytest.fixture(scope="module")
def installed_result():
    return devcheck.run()


def test_the_bundled_content_passes(installed_result):
    assert installed_result.ok, "\n".join(map(str, installed_result.problems))
    assert installed_result.checked == [v.__name__ for v in devcheck.VALIDATORS]
    assert len(installed_result.checked) >= 10


@pytest.mark.slow
def test_the_command_passes_on_the_bundled_content():
    proc = attn_kit("dev", "check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✓ content is consistent" in proc.stdout and "✗" not in proc.stdout


def test_reading_every_suite_leaves_torch_unloaded():
    """`dev check` reads every exercise's suite; only grading a torch exercise needs torch, whose
    import costs more than a second (the torch suite imports it in the functions that use it). The
    suite modules are imported directly, as pipeline.suite_for does once the exercise's dependency
    is found: with torch installed, none loads it; without torch, each still imports."""
    code = (
        "import importlib, sys\nfrom attn_kit.load import catalog\n"
        "suites = [importlib.import_module(f'attn_kit.checks.{e.checks}').SUITE for e in catalog.exercises().values()]\n"
        "print(len(suites), sum(len(s.checks) for s in suites), 'torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    count, checks, torch_loaded = proc.stdout.split()
    assert (int(count), torch_loaded) == (len(catalog.exercises()), "False"), proc.stderr
    assert int(checks) > 0


def _copy_content(folder) -> devcheck.Content:
    ignore = shutil.ignore_patterns("__pycache__")
    prompts = shutil.copytree(package_dir("prompts"), folder / "prompts", ignore=ignore)
    solutions = shutil.copytree(package_dir("solutions"), folder / "solutions", ignore=ignore)
    return devcheck.Content(prompts, solutions)


def test_an_untouched_copy_passes(tmp_path):
    """What the tests below break is a copy made this way: untouched, it passes (so each problem
    they find comes from their edit)."""
    result = devcheck.run(_copy_content(tmp_path))
    assert result.ok, "\n".join(map(str, result.problems))


@pytest.fixture
def copy(tmp_path) -> devcheck.Content:
    """A copy of the bundled prompts/ and solutions/ to break (test_an_untouched_copy_passes)."""
    return _copy_content(tmp_path)


def edit(path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def problems(content: devcheck.Content) -> list[str]:
    return [str(p) for p in devcheck.run(content).problems]


def assert_found(found: list[str], where: str, pattern: str) -> None:
    assert any(p.startswith(where) and re.search(pattern, p) for p in found), (
        f"no problem at {where} matching {pattern!r} in:\n" + "\n".join(found)
    )


def test_a_broken_copy_fails_once_per_breakage(copy):
    exercises, solutions = copy.prompts / "exercises", copy.solutions
    # TOML fields and ids
    edit(exercises / "tiled-softmax.toml", "format = 1\n", "format = 1\nminutez = 3\n")
    edit(exercises / "mha-screen.toml", 'main = "multi_head_attention"', 'main = "multi_head_attn"')
    bugs = copy.prompts / "bugs.toml"
    first = bugs.read_text(encoding="utf-8").split("[[bugs]]")[1]
    bugs.write_text(bugs.read_text(encoding="utf-8") + "\n[[bugs]]" + first, encoding="utf-8")
    # a bug file changed away from its marker, and one named after no catalogue bug
    no_scaling = solutions / "mha-screen" / "bugs" / "no-scaling.py"
    edit(no_scaling, "def padding_mask(lengths, T):", "def padding_mask(lengths, T, pad=0):")
    shutil.copy(solutions / "gqa" / "reference_numpy.py", solutions / "gqa" / "bugs" / "not-a-bug.py")
    # a hint naming a check that does not exist
    edit(exercises / "kv-cache.toml", 'checks = ["step-returns-output-and-cache"', 'checks = ["step-returns-output-and-cach"')
    # a bug file whose bug no check of the exercise declares
    undeclared = solutions / "gqa" / "bugs" / "causal-off-by-one.py"  # a catalogue bug gqa's suite never declares
    shutil.copy(solutions / "gqa" / "bugs" / "no-scaling.py", undeclared)
    edit(undeclared, "BUG(no-scaling)", "BUG(causal-off-by-one)", count=-1)
    # a last hint that no longer points to --locate
    edit(exercises / "rope.toml", "`attn-kit check FILE --locate`", "`attn-kit check FILE`")
    # stray files
    (solutions / "gqa" / "notes.txt").write_text("todo\n")
    (exercises / "README.md").write_text("# notes\n")

    found = problems(copy)
    assert_found(found, "prompts/exercises/tiled-softmax.toml", "unknown key 'minutez'")
    assert_found(found, "prompts/exercises/mha-screen.toml", "main = 'multi_head_attn' is not one of its")
    assert_found(found, "prompts/bugs.toml [bugs] #", "is declared twice")
    assert_found(
        found,
        "solutions/mha-screen/bugs/no-scaling.py",
        r"differs from reference_\w+\.py away from its "
        r"BUG\(no-scaling\) marker",
    )
    assert_found(found, "solutions/gqa/bugs/not-a-bug.py", "'not-a-bug' is not in prompts/bugs.toml")
    assert_found(found, "solutions/gqa/bugs/not-a-bug.py", r"no '# BUG\(not-a-bug\)' marker")
    assert_found(found, "prompts/exercises/kv-cache.toml", "names unknown check 'step-returns-output-and-cach'")
    assert_found(found, "checks/gqa.py", r"no check declares catches=\('causal-off-by-one'")
    assert_found(found, "prompts/exercises/rope.toml", r"last hint .* does not point to `attn-kit check FILE --locate`")
    assert_found(found, "solutions/gqa/notes.txt", "unexpected")
    assert_found(found, "prompts/exercises/README.md", "unexpected")


def test_an_exercise_without_bench_workload_or_solutions_fails(copy):
    text = (copy.prompts / "exercises" / "gqa.toml").read_text(encoding="utf-8")
    text = text.replace('id = "gqa"', 'id = "gqa-two"').replace("order = 3", "order = 99")
    assert "\n[bench]\n" in text
    text = text[: text.index("\n[bench]\n")] + "\n"  # the [bench] table and its sub-tables end the file
    (copy.prompts / "exercises" / "gqa-two.toml").write_text(text.replace("# attn-kit: gqa\n", "# attn-kit: gqa-two\n"), encoding="utf-8")
    found = problems(copy)
    assert_found(found, "prompts/exercises/gqa-two.toml", r"has no bench workload: add a \[bench\] table")
    assert_found(found, "solutions/gqa-two", "missing: every exercise has a solutions folder")
    assert not any(p.startswith("prompts/exercises/gqa.toml") for p in found), found


def test_bench_tables_and_suites_are_checked_against_the_toml(copy, tmp_path):
    exercises = copy.prompts / "exercises"
    edit(exercises / "rope.toml", 'function = "rope_attention"\nsetting', 'function = "rope_attn"\nsetting')
    edit(exercises / "gqa.toml", "[bench.dims]\nB = 1\n", "[bench.dims]\nB = 1\nwidth = 3\n")
    edit(exercises / "cross-attention.toml", 'checks = "cross_attention"', 'checks = "cross_attn"')
    checks = shutil.copytree(package_dir("checks"), tmp_path / "checks", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(checks / "gqa.py", checks / "mqa.py")
    edit(checks / "mqa.py", 'SUITE = Suite("gqa")', 'SUITE = Suite("mqa")')
    copy.checks_dir = checks
    found = problems(copy)
    assert_found(found, "prompts/exercises/rope.toml", r"\[bench\] function = 'rope_attn' is not one of its")
    assert_found(found, "checks/gqa.py", r"bench_inputs does not take the \[bench\] table's T and dims of gqa")
    assert_found(found, "prompts/exercises/cross-attention.toml", r"checks/cross_attn.py does not exist")
    assert_found(found, "checks/mqa.py", r"Suite\('mqa'\) is for no exercise")
    assert len(found) == 4, found


def test_the_command_exits_1_and_lists_the_problems(copy, monkeypatch):
    (copy.solutions / "mha-screen" / "scratch.py").write_text("x = 1\n")
    monkeypatch.setattr(devcheck.Content, "installed", classmethod(lambda cls: copy))
    result = CliRunner().invoke(cli, ["dev", "check"])
    assert result.exit_code == 1
    assert "✗ solutions/mha-screen/scratch.py: unexpected" in result.output
    assert "1 problem(s) in the bundled content." in result.output


def test_dev_update_says_which_tables_it_rewrote(copy, tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text(README.read_text(encoding="utf-8"), encoding="utf-8")  # beside prompts/
    edit(copy.prompts / "exercises" / "paged-attention.toml", "the pool is only read", "the pool is read, never written")
    monkeypatch.setattr(devcheck.Content, "installed", classmethod(lambda cls: copy))
    result = CliRunner().invoke(cli, ["dev", "update"])
    assert (result.exit_code, result.output) == (0, "✓ README.md: rewrote the follow-ups table(s)\n")
    assert "the pool is read, never written |" in (tmp_path / "README.md").read_text(encoding="utf-8")
    (tmp_path / "README.md").unlink()
    result = CliRunner().invoke(cli, ["dev", "update"])
    assert result.exit_code == 2 and "an installed copy" in result.output and "Traceback" not in result.output


def test_unmarked_changes_finds_the_changed_lines():
    reference = '"""Reference."""\nimport math\n\n\ndef f(x):\n    return math.sqrt(x)\n' + "\n" * 20 + "def g():\n    return 1\n"
    marked = reference.replace("math.sqrt(x)", "x  # BUG(no-sqrt): the root is missing")
    assert devcheck.unmarked_changes(marked.replace('"""Reference."""', '"""Known bug."""'), reference, "no-sqrt") == []
    stray = marked.replace("return 1", "return 2")
    assert devcheck.unmarked_changes(stray, reference, "no-sqrt") == [28]


def test_questions_without_required_key_points_and_code_at_hint_one_fail(copy):
    """The rules test_content.py checks on the bundled content, enforced by `dev check` on any copy:
    one or two required key points per question, and no code at level 1 of a hint ladder."""
    gqa = copy.prompts / "exercises" / "gqa.toml"
    edit(gqa, "required = [0, 1]\n", "required = []\n")
    edit(gqa, "required = [2]\n", "required = [0, 1, 2]\n")
    text = gqa.read_text(encoding="utf-8")
    first_hint = text.index('title = "Count the widths"')
    at = text.index("text = '''\n", first_hint) + len("text = '''\n")
    gqa.write_text(text[:at] + "Start from `hd = D // num_heads`.\n" + text[at:], encoding="utf-8")
    found = problems(copy)
    assert_found(found, "prompts/exercises/gqa.toml", r"question 'gqa-cache-saving' marks 0 key points required \(1 or 2\)")
    assert_found(found, "prompts/exercises/gqa.toml", r"question 'mqa-vs-gqa' marks 3 key points required \(1 or 2\)")
    assert_found(found, "prompts/exercises/gqa.toml", r"hint 1 \('Count the widths'\) contains code \('`'\)")
    assert len(found) == 3, found


def test_the_rules_tests_used_to_restate_fail_on_a_broken_copy(copy):
    """Rules that lived in test_catalogue.py and test_content_links.py, now in devcheck: enough
    hints and questions, a bug file per exercise, unique bug titles, questions on a bug's concept
    that talk about it."""
    import dataclasses

    bugs = copy.prompts / "bugs.toml"
    edit(bugs, 'title = "Scores are scaled twice"', 'title = "Scores are not scaled"')
    edit(
        copy.prompts / "exercises" / "paged-attention.toml",
        'id = "paged-why"\nconcept = "paged-cache"',
        'id = "paged-why"\nconcept = "scaling"',
    )
    for path in copy.bug_files("sliding-window"):
        path.unlink()
    gqa = copy.exercises["gqa"]
    copy.exercises["gqa"] = dataclasses.replace(gqa, hints=gqa.hints[:2], questions=gqa.questions[:2])
    found = problems(copy)
    assert_found(found, "prompts/bugs.toml [bugs] #", r"title 'Scores are not scaled' is also no-scaling's")
    assert_found(
        found,
        "paged-attention: no-scaling (scaling)",
        r"reaches paged-attention/paged-why, which is not "
        r"about scaling",
    )
    assert_found(found, "solutions/sliding-window", r"has no bugs/<bug-id>\.py")
    assert_found(found, "prompts/exercises/gqa.toml", r"has 2 \[\[hints\]\]; write at least 3")
    assert_found(found, "prompts/exercises/gqa.toml", r"has 2 \[\[questions\]\]; write at least 3")


def test_a_suite_without_public_checks_or_with_a_later_after_fails(copy, monkeypatch):
    from attn_kit.compare.registry import Suite

    suite = Suite("gqa")

    @suite.check(after=("second",))
    def first(ctx):
        """First."""

    @suite.check()
    def second(ctx):
        """Second."""

    real = devcheck.Content.suite
    monkeypatch.setattr(devcheck.Content, "suite", lambda self, e: suite if e.id == "gqa" else real(self, e))
    found = [str(p) for p in devcheck.run(copy, [devcheck.suites_are_well_formed]).problems]
    assert found == [
        "checks/gqa.py: no check is public=True: mark the statement's worked example as one",
        "checks/gqa.py: check 'first' runs after 'second', which is not an earlier check",
    ]


def test_a_skeleton_placeholder_is_named_with_what_to_write(copy):
    (copy.solutions / "gqa" / "reference_numpy.py").write_text("# attn-kit: gqa\n# TODO(dev new): the reference\nx = 1\n", encoding="utf-8")
    found = [str(p) for p in devcheck.run(copy, [devcheck.no_placeholders_left]).problems]
    assert found == ["solutions/gqa/reference_numpy.py: line 2: fill in the placeholder: the reference"]


# the README beside the content under test (a scratch copy's, in test_dev_new), else this checkout's
README = devcheck.Content.installed().readme_file or Path(__file__).resolve().parents[1] / "README.md"


def test_a_stale_readme_table_is_named_and_dev_update_rewrites_it(copy, tmp_path):
    """The README's tables are generated from the content: an edit to an exercise's data makes the
    README stale until `dev update` rewrites its table, and only that table."""
    readme = tmp_path / "checkout" / "README.md"
    readme.parent.mkdir()
    shutil.copy(README, readme)
    check = [devcheck.readme_tables_are_up_to_date]

    def fresh(readme: Path | None = readme) -> devcheck.Content:  # loads the content anew
        return devcheck.Content(copy.prompts, copy.solutions, readme=readme)

    assert devcheck.run(fresh(), check).ok
    edit(copy.prompts / "exercises" / "gqa.toml", 'builds = "`grouped_query_attention`:', 'builds = "`gqa`:')
    edit(
        copy.prompts / "exercises" / "rope.toml",
        'causal = {checks = ["causal-future-is-ignored"]',
        'causal = {checks = ["causal-future-is-ignored"], note = "any mask"',
    )
    found = [str(p) for p in devcheck.run(fresh(), check).problems]
    assert found == [
        "README.md: out of date (the 'exercises' table differs): run attn-kit dev update",
        "README.md: out of date (the 'properties' table differs): run attn-kit dev update",
    ]
    before = readme.read_text(encoding="utf-8").splitlines()
    assert devcheck.update_readme(fresh()) == ["exercises", "properties"]
    after = readme.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and [b.split(" | ")[0] for _, b in changed] == [
        "| `gqa`",
        "| causal: editing token t changes nothing before t",
    ]
    assert "| `gqa` | `gqa`: keys and values" in after[after.index(changed[0][1])]
    assert devcheck.run(fresh(), check).ok and devcheck.update_readme(fresh()) == []

    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace("<!-- dev update: follow-ups -->\n", ""), encoding="utf-8")
    found = [str(p) for p in devcheck.run(fresh(), check).problems]
    assert found == ["README.md: out of date (no '<!-- dev update: follow-ups -->' ... '<!-- end -->' region): run attn-kit dev update"]
    with pytest.raises(UsageError, match="README.md has no '<!-- dev update: follow-ups -->'"):
        devcheck.update_readme(fresh())

    result = devcheck.run(fresh(None), check)  # as installed: no README beside prompts/, nothing to check
    assert result.ok and not result.notes
    with pytest.raises(UsageError, match="an installed copy"):
        devcheck.update_readme(fresh(None))


def test_the_readme_cells_come_from_checked_data(copy):
    """What the README's tables show of an exercise is validated where it is written: its TOML."""
    kv = copy.prompts / "exercises" / "kv-cache.toml"
    edit(kv, 'causal = {na = "a decode step never sees later tokens"}\n', "")
    edit(kv, 'uniform = {checks = ["new-token-joins-the-keys"]}', 'uniform = {checks = ["new-token-joins"]}')
    edit(kv, "empty-rows = {na = ", 'empty-rows = {checks = ["new-token-joins-the-keys"], na = ')
    edit(kv, "[properties]\n", '[properties]\nshapes = {na = "a | pipe"}\n')
    edit(copy.prompts / "exercises" / "gqa.toml", 'builds = "`grouped_query_attention`: keys', 'builds = " "\n# "')
    found = [str(p) for p in devcheck.run(copy, [devcheck.exercises_fill_their_readme_cells]).problems]
    assert_found(found, "prompts/exercises/kv-cache.toml", r"\[properties\] has no 'causal': name the checks")
    assert_found(found, "prompts/exercises/kv-cache.toml", r"'uniform' names no check of its suite: new-token-joins$")
    assert_found(found, "prompts/exercises/kv-cache.toml", r"'empty-rows' needs checks = \[...\] .* or na, not both")
    assert_found(found, "prompts/exercises/kv-cache.toml", r"'shapes' is not a property of prompts/properties.toml")
    assert_found(found, "prompts/exercises/kv-cache.toml", r"'shapes' na must be one line without '\|'")
    assert_found(found, "prompts/exercises/gqa.toml", r"'builds' is empty")
    assert len(found) == 6, found


def test_bug_files_must_match_the_coverage_table(copy):
    coverage = copy.prompts / "coverage.toml"
    edit(coverage, 'paged-attention = ["scores", "softmax", "blocked-rows"]', 'paged-attention = ["softmax", "blocked-rows"]')
    (copy.solutions / "gqa" / "bugs" / "mutates-input.py").unlink()
    found = [str(p) for p in devcheck.run(copy, [devcheck.bug_files_match_the_coverage_table]).problems]
    assert_found(
        found,
        "solutions/paged-attention/bugs/no-scaling.py",
        r"cannot be made here: add the features it "
        r"needs to \[features\] paged-attention",
    )
    assert_found(found, "solutions/gqa", r"has no bugs/mutates-input\.py, though prompts/coverage.toml says")
    coverage.write_text("format = 1\n", encoding="utf-8")
    found = [str(p) for p in devcheck.run(copy, [devcheck.bug_files_match_the_coverage_table]).problems]
    assert found == ["prompts/coverage.toml: does not load: expected format = 1, [features] and [needs]"]


def test_a_family_entry_whose_text_left_its_bug_file_fails(copy):
    """A reference or bug file edited without its prompts/families.toml entries (the rename of dS
    to dZ once left backward-missing-scale's entries pointing at text that was gone)."""
    edit(copy.prompts / "families.toml", '"    dq = dZ @ k * gscale "', '"    dq = dS @ k * gscale "')
    found = problems(copy)
    assert_found(found, "prompts/families.toml", r"backward-missing-scale .*dS @ k.* is not in the code it edits")
    assert len([p for p in found if p.startswith("prompts/families.toml")]) == 1


def test_the_docs_properties_example_names_every_property():
    """docs/adding-an-exercise.md's [properties] example loads and has a cell per headline property."""
    import tomllib

    from attn_kit.load import catalog

    text = (Path(__file__).resolve().parents[1] / "docs" / "adding-an-exercise.md").read_text(encoding="utf-8")
    block = next(b.split("```", 1)[0] for b in text.split("```toml")[1:] if b.lstrip().startswith("[properties]"))
    cells = catalog._load_property_cells(tomllib.loads(block)["properties"], "docs")
    assert [c.property for c in cells] == [p.id for p in devcheck.Content.installed().properties]


def test_every_bug_needs_a_short_fix_phrase(copy):
    """The first screen gives each cause one or two lines: every bug has a fix_short of at most
    FIX_SHORT_MOST characters, and an exercise that rewords a fix rewords the phrase too."""
    bugs = copy.prompts / "bugs.toml"
    edit(bugs, 'fix_short = "Divide scores by √(head width) before softmax"\n', "")
    edit(bugs, 'fix_short = "Take the max over allowed entries only"', 'fix_short = "' + "x" * 49 + '"')
    sliding = copy.prompts / "exercises" / "sliding-window.toml"
    edit(sliding, 'fix_short = "Score each query chunk only against its band"\n', "")
    found = problems(copy)
    assert_found(found, "prompts/bugs.toml [bugs] #1", "'fix_short' is empty")
    assert_found(found, "prompts/bugs.toml [bugs] #6", "'max-over-blocked': fix_short has 49 characters, more than 48")
    assert_found(found, "prompts/exercises/sliding-window.toml", "'materialises-scores' rewords fix but not fix_short")
