"""The catalogue proof: every reference passes, every starter fails, every known-bug variant fails
and is diagnosed as exactly its own bug first, and every check can fail. The content rules
themselves live in devcheck (`attn-kit dev check`; tests/test_devcheck.py runs every one).

Parametrised over every exercise, so new exercises and bug files are covered as they land. The
references and bug variants are graded in-process (helpers.graded, cached per session), each bug
file once, and every property of it is asserted on that one report; the can-fail test and one CLI
smoke test per exercise (`attn-kit check --json` says what the library says) read the same
reports, with the seed each was graded with. Only the first file of each exercise is in the quick
run (see _slow).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings

from attn_kit.base.errors import CatalogError
from attn_kit.base.paths import bug_files, bug_id_of, reference_files, solutions_dir
from attn_kit.cli import cli
from attn_kit.grading import pipeline
from attn_kit.load import catalog

from conftest import need_extra
from helpers import CORPUS, DRAWS, NO_SHRINK, check_json, corpus_data, drawn_seed, graded, graded_exercises, graded_json
from test_content_links import graded_bug_points_at_its_hint

SPEC = Path(__file__).resolve().parents[2] / "shared" / "SPEC.md"
KNOWN_GAPS = tomllib.loads((Path(__file__).parent / "known_gaps.toml").read_text(encoding="utf-8"))
EXERCISES = list(catalog.exercises().values())
GRADED = graded_exercises()  # torch exercises only where torch is installed (CI installs it)


def _slow(exercise, n: int = 0) -> list:
    """Marks for a test of an exercise's n-th file: only the first of each is in the quick run
    (`-m "not slow"`), and none of an exercise that needs torch (its imports alone take seconds)."""
    return [pytest.mark.slow] if n or exercise.needs else []


def _cases(files_of) -> list:
    """(exercise id, path) per file."""
    return [pytest.param(e.id, p, marks=_slow(e, n), id=f"{e.id}-{p.name}") for e in GRADED for n, p in enumerate(files_of(e.id))]


EXERCISE_CASES = [pytest.param(e, marks=_slow(e), id=e.id) for e in GRADED]


BUG_CASES = _cases(bug_files)
REF_CASES = _cases(reference_files)


if SPEC.exists():  # the design spec beside the project's own working copies; a user's clone has none,
    # and then this test is not collected at all rather than skipped with a reason about a file they never had
    def test_spec_bug_ids_are_all_in_the_catalogue():
        table = SPEC.read_text().split("## Known bugs the kit names", 1)[1]
        spec_ids = set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.MULTILINE))
        assert len(spec_ids) >= 20
        assert spec_ids <= set(catalog.bugs())


def test_catalog_rejects_unknown_keys(tmp_path):
    good = (solutions_dir("mha-screen").parents[1] / "prompts" / "exercises" / "mha-screen.toml").read_text()
    bad = tmp_path / "mha-screen.toml"
    bad.write_text(good.replace("minutes = 45", "minutes = 45\nminutez = 3"))
    with pytest.raises(CatalogError, match="unknown key 'minutez'"):
        catalog.load_exercise(bad)
    bad.write_text(good.replace("format = 1\n", ""))
    with pytest.raises(CatalogError, match="format = 1"):
        catalog.load_exercise(bad)


# Seeds are drawn by hypothesis (helpers.drawn_seed: one per file and run, fixed per file in CI),
# and for the references seed 1 as well. One grading per bug file carries every property of it
# (fails, named as itself, every failing check attributed to it, the checks about properties it
# gets right pass). The torch exercise's bug files get seed 1 only (their gradings cost ~5x, most
# of it diagnosis); benchmarks/diagnosis_rates.py runs every bug file on more seeds.
SEED_ONE = -1  # the explicit example: seed 1


def _seed(path: Path, draw: int) -> int:
    return 1 if draw == SEED_ONE else drawn_seed(path.name, draw)


@pytest.mark.parametrize("exercise_id, path", REF_CASES)
@settings(max_examples=1, phases=NO_SHRINK)
@example(draw=SEED_ONE)
@given(draw=DRAWS)
def test_every_reference_passes_every_check(exercise_id, path, draw):
    seed = _seed(path, draw)
    data, code = graded_json(path, seed)
    failing = [(c["id"], c["message"]) for c in data["checks"] if c["status"] not in ("pass", "skip")]
    assert code == 0 and data["passed"] and not failing, failing
    assert data["exercise"] == exercise_id
    assert data["diagnosis"] == []


DRAWN: dict[Path, int] = {}  # bug file -> the seed this run graded it with (read by the can-fail test)


def _named_as_itself(exercise_id: str, path: Path, seed: int) -> None:
    """The file fails, is diagnosed as its own bug first, and every failing check is attributed to it."""
    DRAWN[path] = seed
    expected = bug_id_of(path)
    data, code = graded_json(path, seed)
    assert code == 1 and data["passed"] is False, f"{path.name} passed with seed {seed}"
    assert data["exercise"] == exercise_id
    failing = [r for r in graded(path, seed).results if r.status in ("fail", "error")]
    assert expected in {b for r in failing for b in r.catches}, (
        f"seed {seed}: none of the failing checks {[r.id for r in failing]} declares catches={expected!r}"
    )
    found = [d["bug"] for d in data["diagnosis"]]
    gap = KNOWN_GAPS.get(f"{exercise_id}/{path.name}")  # tests/known_gaps.toml
    if gap and found[:1] != [expected]:
        pytest.xfail(f"known gap of the current diagnosis engine: {gap}")
    assert found and found[0] == expected, f"seed {seed}: diagnosed {found}, expected {expected} first"
    others = [(c["id"], c["bug"]) for c in data["checks"] if c["status"] in ("fail", "error") and c["bug"] != expected]
    assert not others, f"seed {seed}: failing checks attributed to something else than {expected}: {others}"
    _isolated(exercise_id, path, seed)
    graded_bug_points_at_its_hint(exercise_id, path, graded(path, seed))


NUMPY_BUG_CASES = [c for c in BUG_CASES if not catalog.exercise(c.values[0]).needs]
TORCH_BUG_CASES = [c for c in BUG_CASES if catalog.exercise(c.values[0]).needs]


@pytest.mark.parametrize("exercise_id, path", NUMPY_BUG_CASES)
@settings(max_examples=1, phases=NO_SHRINK)
@given(draw=DRAWS)
def test_every_bug_variant_fails_and_is_diagnosed_as_itself(exercise_id, path, draw):
    _named_as_itself(exercise_id, path, _seed(path, draw))


@pytest.mark.parametrize("exercise_id, path", TORCH_BUG_CASES)
def test_every_torch_bug_variant_fails_and_is_diagnosed_as_itself(exercise_id, path):
    _named_as_itself(exercise_id, path, 1)


# --- the CLI, once per exercise -------------------------------------------------------------------


@pytest.mark.parametrize("exercise", EXERCISE_CASES)
def test_starter_fails(exercise, tmp_path):
    path = tmp_path / "starter.py"
    # the command in-process (tests/test_cli.py runs `start` itself in a subprocess)
    assert CliRunner().invoke(cli, ["start", exercise.id, str(path)]).exit_code == 0
    data, code = graded_json(path, 1, timeout=2)
    assert code == 1 and data["passed"] is False and data["exercise"] == exercise.id


def _verdicts(data: dict) -> tuple:
    return (
        data["exercise"],
        data["passed"],
        data["seed"],
        [(c["id"], c["status"], c["bug"]) for c in data["checks"]],
        [d["bug"] for d in data["diagnosis"]],
    )


# the quick run compares the first exercise (the command's path is the same for every exercise), the full suite each
@pytest.mark.parametrize("exercise", [pytest.param(e, marks=_slow(e, n), id=e.id) for n, e in enumerate(GRADED)])
def test_the_cli_says_what_the_library_says(exercise):
    """`attn-kit check --json` in a subprocess gives the verdicts of the in-process grading the
    tests above read (their first bug variant, with the seed they drew: no second grading), with
    the exit status it implies."""
    path = bug_files(exercise.id)[0]
    seed = DRAWN.get(path, 1)
    cli, cli_code = check_json(path, "--seed", seed)
    library, code = graded_json(path, seed)
    assert _verdicts(cli) == _verdicts(library) and cli_code == code == 1


# --- a check named after one property passes a file that gets that property right ---------------

MASK_BUGS = {
    "blocked-row-uniform",
    "blocked-row-nan",
    "additive-mask-leaks",
    "fill-value-too-weak",
    "mask-inverted",
    "max-over-blocked",
    "causal-off-by-one",
    "padding-masks-queries",
    "mask-not-boolean",
    "b-o-not-suppressed",
    "b-o-dropped-for-partial",
    "causal-offset-ignored",
}
BIAS_BUGS = {"biases-ignored", "bias-scaled"}
ISOLATED = {  # check id -> bugs it must not fail for: its cases have no masks / no biases
    "heads-use-contiguous-columns": MASK_BUGS | BIAS_BUGS,
    "scores-scaled-by-head-width": MASK_BUGS | BIAS_BUGS,
    "single-head-plain-formula": MASK_BUGS | BIAS_BUGS,
    "scores-scaled-by-key-width": MASK_BUGS | BIAS_BUGS,
    "heads-split-contiguously": MASK_BUGS | BIAS_BUGS,
    "value-width-differs-from-key-width": MASK_BUGS | BIAS_BUGS,
    "lengths-differ-both-ways": MASK_BUGS | BIAS_BUGS,
    "biases-are-applied": MASK_BUGS,
}


# inverting the combined mask (`~allowed`) also inverts "no mask at all": every key is blocked, so
# no unmasked case can pass it (the per-mask and key-padding forms do pass)
NOT_ISOLABLE = {"mha-masked-bias/mask-inverted.py"}


def _isolated(exercise_id: str, path: Path, seed: int) -> None:
    """A mask or bias mistake must not fail the checks about head split, scaling or biases whose
    cases carry no masks (and no biases): those files get those properties right. Checked on the
    report the test above reads, for whichever seed it drew."""
    bug = bug_id_of(path)
    if bug not in MASK_BUGS | BIAS_BUGS or f"{exercise_id}/{path.name}" in NOT_ISOLABLE:
        return
    wrong = [(r.id, r.message) for r in graded(path, seed).results if r.id in ISOLATED and bug in ISOLATED[r.id] and r.status != "pass"]
    assert not wrong, f"seed {seed}: checks about a property {path.name} gets right failed: {wrong}"


def test_the_isolation_table_names_real_checks_and_bugs():
    """ISOLATED only means something if its check ids and bug ids exist (some are mha-masked-bias's
    checks: without torch the test skips, counted in the summary line)."""
    for exercise in EXERCISES:
        if exercise not in GRADED:
            need_extra(exercise)
    checks = {c.id for e in GRADED for c in pipeline.suite_for(e).checks}
    assert set(ISOLATED) <= checks, set(ISOLATED) - checks
    assert MASK_BUGS | BIAS_BUGS <= set(catalog.bugs()), (MASK_BUGS | BIAS_BUGS) - set(catalog.bugs())
    assert any(bug_id_of(p) in MASK_BUGS | BIAS_BUGS for e in GRADED for p in bug_files(e.id))


# --- every graded check can fail ----------------------------------------------------------------
# For each exercise, each check fails (status `fail`, a behavioural verdict, not an error from a
# stub) for at least one known-bug implementation or one file of the pathological corpus listed in
# tests/corpus/can_fail.toml, or in a can_fail.toml beside an exercise's own corpus folder
# (tests/corpus/<folder>/can_fail.toml: a new exercise edits no shared list). A bug file is read
# with the seed the tests above graded it with in this run (the session cache: no second grading),
# seed 1 when they did not run; corpus files with seed 1.


def _extra_corpus() -> tuple[dict[str, list[str]], list[str]]:
    """({exercise: corpus files, relative to tests/corpus/}, exercises listed in two files)."""
    merged: dict[str, list[str]] = dict(corpus_data("can_fail.toml"))
    twice = []
    for own in sorted(CORPUS.glob("*/can_fail.toml")):
        for exercise_id, names in corpus_data(own.relative_to(CORPUS).as_posix()).items():
            twice += [exercise_id] if exercise_id in merged else []
            merged[exercise_id] = list(names)
    return merged, twice


EXTRA, EXTRA_TWICE = _extra_corpus()


@pytest.mark.slow
@pytest.mark.parametrize("exercise", graded_exercises(), ids=lambda e: e.id)
def test_every_check_fails_for_some_known_mistake(exercise):
    # the bug files first: their reports are cached already; a corpus file is graded only while a
    # check has not failed yet
    files = list(bug_files(exercise.id)) + [CORPUS / name for name in EXTRA.get(exercise.id, [])]
    suite = pipeline.suite_for(exercise)
    failed_by: dict[str, list[str]] = {}
    for path in files:
        report = graded(path, seed=DRAWN.get(path, 1))
        assert report.exercise == exercise.id, f"{Path(path).name} was graded as {report.exercise}"
        for result in report.results:
            if result.status == "fail":
                failed_by.setdefault(result.id, []).append(Path(path).name)
        if all(c.id in failed_by for c in suite.checks):
            break  # every check has failed for something: the rest adds nothing
    never = [c.id for c in suite.checks if c.id not in failed_by]
    assert not never, f"no known mistake makes these checks fail: {never}"


def test_the_extra_corpus_names_real_exercises_and_files():
    """An exercise without an entry has no extra corpus (`dev new` edits no shared table); an
    exercise's list sits in one file."""
    assert not EXTRA_TWICE, f"listed in two can_fail.toml files: {EXTRA_TWICE}"
    assert set(EXTRA) <= set(catalog.exercises()), set(EXTRA) - set(catalog.exercises())
    for names in EXTRA.values():
        for name in names:
            assert (CORPUS / name).exists(), name
