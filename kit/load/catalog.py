"""prompts/*.toml -> frozen dataclasses. Unknown or missing keys are errors naming file and key.

prompts/exercises/<id>.toml holds one exercise (statement, starter, functions, hints, discussion
questions, follow-ups, rubric, and the [bench] workload `attn-kit bench` runs); prompts/bugs.toml
holds the known bugs several exercises share, and prompts/catalogue/<id>.toml one exercise's own
part of the catalogue (OwnCatalogue: the bugs only it makes, its bug families, its features), so
that adding an exercise edits no shared file. The loaders merge the two: shared entries first, then
each exercise's file in name order; an id defined twice is an error.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import tomllib
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from attn_kit.base.errors import CatalogError, UsageError
from attn_kit.base.paths import bug_files, bug_id_of, package_dir
from attn_kit.base.recordtype import record

FORMAT_VERSION = 1


@record
class Function:
    name: str
    signature: str  # as shown to the candidate, e.g. "stable_softmax(scores, allowed=None)"


@record
class Hint:
    title: str
    text: str
    concept: str = ""
    checks: tuple[str, ...] = ()  # check ids this hint helps with
    step: str = ""  # one of HINT_STEPS: a nudging question, the concept, near-code
    dimension: str = ""  # the scored dimension (DIMENSIONS) a used hint caps at 3


HINT_STEPS = ("question", "concept", "code")


@record
class Question:
    id: str
    concept: str
    prompt: str
    key_points: tuple[str, ...]
    required: tuple[int, ...] = ()  # 0-based indexes of the key points an answer must cover (one or two)
    answer: str = ""  # a model answer (Markdown: code blocks allowed), for review and the sheet
    source: str = ""  # where its facts come from: a paper or formula, recomputed in the tests


@record
class FollowUp:
    prompt: str
    exercise: str = ""  # an exercise id when the follow-up is itself an exercise
    answer: str = ""  # what a strong candidate says, for the interviewer


DIMENSIONS = ("correctness", "robustness", "shapes", "tests", "systems", "communication")


@record
class Dimension:
    """One scored rubric dimension: what earns 1, 2, 3 and 4 on this exercise."""

    dimension: str  # one of DIMENSIONS
    anchors: tuple[str, ...]  # exactly four, anchors[0] describes a score of 1


@record
class PropertyCell:
    """How an exercise states one of the README's headline properties (prompts/properties.toml):
    the checks that state it, with an optional note, or `na`: why the exercise cannot break it."""

    property: str  # a property id of prompts/properties.toml
    checks: tuple[str, ...] = ()
    note: str = ""
    na: str = ""


@record
class Property:
    """A headline property every attention layer has: a row of the README's properties table."""

    id: str
    title: str


@record
class BugText:
    """An exercise's own wording of a catalogue bug (`[[bug_texts]]`): the texts it sets replace
    the shared ones of prompts/bugs.toml wherever the bug is shown for this exercise, for a fix or
    a test idea that would be wrong under the exercise's conventions (its widths, its output for a
    fully blocked row, its function names)."""

    bug: str  # a bug id of prompts/bugs.toml with a file under solutions/<exercise>/bugs/
    symptom: str = ""
    fix: str = ""
    test_idea: str = ""
    fix_short: str = ""  # the fix in a phrase, for the first screen (required when `fix` is set)


@record
class Checkpoint:
    minute: int  # minutes into the screen
    expect: str  # where a candidate on track is by then


@record
class Seniority:
    level: str  # e.g. "junior", "mid", "senior"
    expect: str


@record
class RubricItem:
    watch_for: str
    why: str = ""


@record
class Expectation:
    """The growth exponent `attn-kit bench` expects (time or memory ≈ T^exponent), and why."""

    exponent: float
    why: str  # the reason, in the candidate's terms (one line)
    if_higher: str = ""  # what a clearly higher fitted exponent usually means
    if_lower: str = ""  # ... and a clearly lower one


BENCH_HARNESSES = ("call", "decode-steps")
BENCH_INPUTS = ("as-imported", "arrays", "torch-if-imported")


@record
class Bench:
    """An exercise's `[bench]` table: what `attn-kit bench` calls and what growth to expect.

    The inputs of each size come from the exercise's checks module: the function its SUITE
    registers with `@SUITE.for_bench`, called as `build(rng, T, **dims)`.
    """

    function: str  # the function bench calls (one of the exercise's [[functions]])
    dims: tuple[tuple[str, int], ...]  # fixed dimensions, in order: passed to the builder and shown
    setting: str  # the rest of the setting, shown after the dimensions: "causal mask"
    sizes: tuple[int, ...]  # the ladder of lengths, small first: the budget decides how far it goes
    time: Expectation
    memory: Expectation
    size: str = "T"  # the name of the varied length, as the exercise's statement calls it
    unit: str = "call"  # what one timed run is: "call", "decode step"
    inputs: str = "as-imported"  # one of BENCH_INPUTS: lists unless the file imports numpy/torch,
    #                                     NumPy arrays whatever it imports, or torch tensors for torch files
    harness: str = "call"  # one of BENCH_HARNESSES: time one call, or fill a cache and time one step
    contrast: str = ""  # a line putting the expected growth next to the naive one

    @property
    def dimensions(self) -> dict[str, int]:
        return dict(self.dims)

    @property
    def setting_text(self) -> str:
        return ", ".join([f"{k}={v}" for k, v in self.dims] + ([self.setting] if self.setting else []))


MASK_KINDS = ("causal", "window", "padding")  # the patterns a [[masks]] picture may draw (render/grid.py)


@record
class MaskPicture:
    """A `[[masks]]` entry: a mask pattern `show` draws as a grid of which keys each query sees.
    `kind` is one of MASK_KINDS; `size` the number of tokens; `param` the window (window) or the
    length (padding); `label` names it as the statement does."""

    kind: str
    label: str
    size: int = 5
    param: int = 0


@record
class Exercise:
    id: str
    title: str
    summary: str
    order: int
    main: str  # the function that identifies a file as this exercise
    checks: str  # module under attn_kit.checks holding the suite
    oracle: str  # reference file the kit computes expected values with
    statement: str
    starter: str
    functions: tuple[Function, ...]
    hints: tuple[Hint, ...] = ()
    questions: tuple[Question, ...] = ()
    followups: tuple[FollowUp, ...] = ()
    rubric: tuple[RubricItem, ...] = ()
    scoring: tuple[Dimension, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    seniority: tuple[Seniority, ...] = ()
    needs: str = ""  # optional dependency, e.g. "torch"
    minutes: int = 45  # default mock-screen length
    bench: Bench | None = None  # the [bench] table (`attn-kit dev check` requires one)
    builds: str = ""  # the README's Exercises table: what you build (`dev check` requires it)
    proves: str = ""  # the README's follow-ups table: what the kit proves (a row when set)
    properties: tuple[PropertyCell, ...] = ()  # the [properties] table: the README's headline properties
    bug_texts: tuple[BugText, ...] = ()  # [[bug_texts]]: this exercise's wording of shared bugs
    masks: tuple[MaskPicture, ...] = ()  # the [[masks]] pictures `show` draws under the statement
    path: Path = field(default=Path(), compare=False)

    @property
    def function_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions)

    def signature_of(self, name: str) -> str:
        return next(f.signature for f in self.functions if f.name == name)

    @property
    def bug_ids(self) -> tuple[str, ...]:
        """Known bugs with an implementation under solutions/<id>/bugs/, in catalogue order."""
        present = {bug_id_of(p) for p in bug_files(self.id)}
        return tuple(b for b in bugs() if b in present)

    def bug(self, bug_id: str) -> Bug | None:
        """The catalogue's bug as this exercise states it: its [[bug_texts]] entry's texts over the
        shared ones of prompts/bugs.toml (None for an id the catalogue does not have)."""
        return bug_in(self, bug_id)


FIX_SHORT_MOST = 48  # a bug's fix_short, in characters: a cause then fits two lines at 80 columns
SEVERITIES = ("crash", "wrong", "edge")  # a bug's severity, worst first (prompts/bugs.toml's header says what each means)
# The one known bug the kit names from data rather than from a bug file's outputs: the sandbox
# sees the candidate's calls write into their arguments (grading.pipeline.mutation_found, judged by the check that runs last).
MUTATION_BUG = "mutates-input"


@record
class Bug:
    id: str
    title: str
    symptom: str  # what goes wrong, in one or two sentences
    fix: str  # the fix in one sentence
    test_idea: str  # the one-line idea of a test that catches it
    concept: str  # the discussion concept it belongs to (for review scheduling)
    severity: str = ""  # one of SEVERITIES (`attn-kit dev check` requires it): sets the mock's correctness
    # the fix in a phrase of at most FIX_SHORT_MOST characters: a failing check's first screen
    # gives each cause one or two lines at 80 columns (`attn-kit dev check` requires it)
    fix_short: str = ""


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Record = TypeVar("_Record", bound="DataclassInstance")


def _build(cls: type[_Record], data: dict[str, Any], where: str) -> _Record:
    """Instantiate a dataclass from a TOML table, rejecting unknown and missing keys."""
    names = {f.name for f in dataclasses.fields(cls) if f.init and f.name != "path"}
    unknown = sorted(set(data) - names)
    if unknown:
        raise CatalogError(f"{where}: unknown key '{unknown[0]}' (allowed: {', '.join(sorted(names))})")
    required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    missing = sorted(required - set(data))
    if missing:
        raise CatalogError(f"{where}: missing key '{missing[0]}'")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**values)


def _read_toml(path: Path) -> dict:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: {exc}") from None
    if data.pop("format", None) != FORMAT_VERSION:
        raise CatalogError(f"{path}: expected 'format = {FORMAT_VERSION}' at the top")
    return data


def load_exercise(path: Path) -> Exercise:
    data = _read_toml(path)
    nested = {
        "functions": Function,
        "hints": Hint,
        "questions": Question,
        "followups": FollowUp,
        "rubric": RubricItem,
        "scoring": Dimension,
        "checkpoints": Checkpoint,
        "seniority": Seniority,
        "bug_texts": BugText,
        "masks": MaskPicture,
    }
    for key, cls in nested.items():
        if key in data:
            data[key] = tuple(_build(cls, item, f"{path.name} [{key}] #{i + 1}") for i, item in enumerate(data[key]))
    for i, mask in enumerate(data.get("masks", ())):
        if mask.kind not in MASK_KINDS:
            raise CatalogError(f"{path.name} [masks] #{i + 1}: kind '{mask.kind}' is not one of {', '.join(MASK_KINDS)}")
    if "bench" in data:
        data["bench"] = _load_bench(data["bench"], f"{path.name} [bench]")
    if "properties" in data:
        data["properties"] = _load_property_cells(data["properties"], f"{path.name} [properties]")
    exercise = _build(Exercise, data, path.name)
    if exercise.id != path.stem:
        raise CatalogError(f"{path.name}: id '{exercise.id}' does not match the file name")
    return dataclasses.replace(exercise, path=path)


def _load_property_cells(table: object, where: str) -> tuple[PropertyCell, ...]:
    """The [properties] table: {property id: {checks = [...], note = "..."} or {na = "..."}}."""
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise CatalogError(f'{where}: must be a table of inline tables (causal = {{checks = ["..."]}})')
    return tuple(_build(PropertyCell, dict(cell, property=name), f"{where} {name}") for name, cell in table.items())


def load_properties(path: Path) -> tuple[Property, ...]:
    """The headline properties of prompts/properties.toml, in file order."""
    data = _read_toml(path)
    items = tuple(_build(Property, item, f"{path.name} [properties] #{i + 1}") for i, item in enumerate(data.pop("properties", [])))
    if data:
        raise CatalogError(f"{path.name}: unknown key '{sorted(data)[0]}' (allowed: format, properties)")
    return items


def _load_bench(table: object, where: str) -> Bench:
    """The [bench] table: [bench.dims], [bench.time] and [bench.memory] are sub-tables."""
    if not isinstance(table, dict):
        raise CatalogError(f"{where}: must be a table")
    data = dict(table)
    for key in ("time", "memory"):
        if isinstance(data.get(key), dict):
            expectation = _build(Expectation, data[key], f"{where}.{key}")
            if not isinstance(expectation.exponent, (int, float)) or isinstance(expectation.exponent, bool):
                raise CatalogError(f"{where}.{key}: exponent must be a number")
            data[key] = dataclasses.replace(expectation, exponent=float(expectation.exponent))
        elif key in data:
            raise CatalogError(f"{where}: '{key}' must be a table ([bench.{key}] with exponent and why)")
    dims = data.get("dims", {})
    if not isinstance(dims, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in dims.values()):
        raise CatalogError(f"{where}: 'dims' must be a table of whole numbers ([bench.dims] B = 1 ...)")
    data["dims"] = tuple(dims.items())
    bench = _build(Bench, data, where)
    if bench.harness not in BENCH_HARNESSES:
        raise CatalogError(f"{where}: harness = '{bench.harness}' is not one of {', '.join(BENCH_HARNESSES)}")
    if bench.inputs not in BENCH_INPUTS:
        raise CatalogError(f"{where}: inputs = '{bench.inputs}' is not one of {', '.join(BENCH_INPUTS)}")
    if len(bench.sizes) < 2 or any(not isinstance(n, int) or n < 1 for n in bench.sizes) or list(bench.sizes) != sorted(set(bench.sizes)):
        raise CatalogError(f"{where}: sizes must be at least two increasing positive whole numbers")
    return bench


_LOADED: dict[Path, Exercise] = {}  # each exercise file read once, by exercise() or exercises()


def _load_once(path: Path) -> Exercise:
    if path not in _LOADED:
        _LOADED[path] = load_exercise(path)
    return _LOADED[path]


def ids() -> set[str]:
    """The exercise ids, from the file names alone (each file's id must match its name)."""
    return {p.stem for p in (package_dir("prompts") / "exercises").glob("*.toml")}


@functools.cache
def exercises() -> dict[str, Exercise]:
    """All exercises by id, in their declared order."""
    found = [_load_once(p) for p in (package_dir("prompts") / "exercises").glob("*.toml")]
    return {e.id: e for e in sorted(found, key=lambda e: (e.order, e.id))}


def load_bugs(path: Path) -> dict[str, Bug]:
    """A known-bug catalogue file by id, in file order."""
    data = _read_toml(path)
    items = [_build(Bug, item, f"{path.name} [bugs] #{i + 1}") for i, item in enumerate(data.pop("bugs", []))]
    if data:
        raise CatalogError(f"{path.name}: unknown key '{sorted(data)[0]}' (allowed: format, bugs)")
    return {b.id: b for b in items}


@functools.cache
def bugs() -> dict[str, Bug]:
    """The known-bug catalogue by id: prompts/bugs.toml's in file order, then each exercise's own."""
    return load_catalogue_bugs(package_dir("prompts"))


# --- one exercise's own part of the catalogue: prompts/catalogue/<id>.toml ---------------------------

OWN_DIR = "catalogue"  # prompts/catalogue/<exercise id>.toml
WORD_TABLES = ("concept_words", "bug_words", "hint_words")  # prompts/concepts.toml's tables (kit/dev/check.py reads them)
OWN_KEYS = ("features", "bugs", "family", *WORD_TABLES)


@record
class OwnCatalogue:
    """What one exercise adds to the shared catalogue files, in its own file: the bugs only it makes
    (their coverage need is the exercise's id: they apply to it alone), the [[family]] entries of
    its bug files (families.toml's format; `exercise` may be left out), its coverage features
    (coverage.toml's [features] entry), and the words of prompts/concepts.toml for a concept it
    introduces and for its own bugs ([concept_words], [bug_words], [hint_words]). An id of
    prompts/bugs.toml, a family of another exercise or features declared in coverage.toml too
    are errors: each definition lives in one place."""

    exercise: str  # the file name's stem
    bugs: dict[str, Bug]
    features: tuple[str, ...] | None  # None: the file declares none (coverage.toml may)
    families: tuple[dict, ...]  # each with exercise = this exercise
    words: dict[str, dict] = field(default_factory=dict, compare=False)  # its WORD_TABLES: a new concept's words, its bugs'
    path: Path = field(default=Path(), compare=False)


def own_catalogue_files(prompts: Path) -> list[Path]:
    """prompts/catalogue/*.toml, in name order (the order their entries are merged in)."""
    return sorted((prompts / OWN_DIR).glob("*.toml"))


def load_own_catalogue(path: Path, lenient: bool = False) -> OwnCatalogue:
    """One exercise's own file; `lenient` leaves out a family of another exercise instead of raising."""
    data = _read_toml(path)
    where, exercise_id = f"{OWN_DIR}/{path.name}", path.stem
    unknown = sorted(set(data) - set(OWN_KEYS))
    if unknown:
        raise CatalogError(f"{where}: unknown key '{unknown[0]}' (allowed: format, {', '.join(OWN_KEYS)})")
    items = [_build(Bug, item, f"{where} [bugs] #{i + 1}") for i, item in enumerate(data.get("bugs", []))]
    twice = sorted({b.id for b in items if [c.id for c in items].count(b.id) > 1})
    if twice:
        raise CatalogError(f"{where}: bug id '{twice[0]}' is defined twice")
    features = data.get("features")
    if features is not None and not (isinstance(features, list) and all(isinstance(f, str) for f in features)):
        raise CatalogError(f"{where}: 'features' must be a list of feature names (prompts/coverage.toml's header says each)")
    families = []
    for i, entry in enumerate(data.get("family", [])):
        if entry.setdefault("exercise", exercise_id) != exercise_id and lenient:
            continue
        if entry["exercise"] != exercise_id:
            raise CatalogError(
                f"{where} [[family]] #{i + 1}: exercise = '{entry['exercise']}' is another exercise's: "
                f"its families belong in prompts/{OWN_DIR}/{entry['exercise']}.toml"
            )
        families.append(entry)
    words = {table: data[table] for table in WORD_TABLES if table in data}
    if not all(isinstance(t, dict) for t in words.values()):
        raise CatalogError(f"{where}: {', '.join(WORD_TABLES)} must be tables, as in prompts/concepts.toml")
    return OwnCatalogue(
        exercise_id, {b.id: b for b in items}, None if features is None else tuple(features), tuple(families), words=words, path=path
    )


def own_catalogues(prompts: Path, lenient: bool = False) -> tuple[OwnCatalogue, ...]:
    """Every exercise's own file, loaded; `lenient` leaves out a file that does not load (for
    `dev check`, which reports it once and checks the rest against what loads)."""
    found = []
    for path in own_catalogue_files(prompts):
        try:
            found.append(load_own_catalogue(path, lenient))
        except CatalogError:
            if not lenient:
                raise
    return tuple(found)


def _twice(message: str, lenient: bool) -> None:
    if not lenient:
        raise CatalogError(message)


def load_catalogue_bugs(prompts: Path, lenient: bool = False) -> dict[str, Bug]:
    """Every known bug: prompts/bugs.toml's, then each exercise's own; an id defined twice is an
    error (`lenient`: the first definition stands, and own files that do not load are left out)."""
    merged = load_bugs(prompts / "bugs.toml")
    origin = dict.fromkeys(merged, "bugs.toml")
    for own in own_catalogues(prompts, lenient):
        for bug_id, bug in own.bugs.items():
            if bug_id in merged:
                _twice(f"{OWN_DIR}/{own.path.name}: bug id '{bug_id}' is also defined in {origin[bug_id]}: define it once", lenient)
                continue
            merged[bug_id], origin[bug_id] = bug, f"{OWN_DIR}/{own.path.name}"
    return merged


def load_coverage(prompts: Path, lenient: bool = False) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """({exercise: its features}, {bug: the features it needs}): prompts/coverage.toml's tables, then
    each exercise's own features and its own bugs, which need just its id (`lenient` as for
    load_catalogue_bugs)."""
    path = prompts / "coverage.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{path}: {exc}") from None
    if data.get("format") != FORMAT_VERSION or not isinstance(data.get("features"), dict) or not isinstance(data.get("needs"), dict):
        raise CatalogError(f"{path}: expected 'format = 1', a [features] table and a [needs] table")
    features = {e: tuple(f) for e, f in data["features"].items()}
    needs = {b: tuple(f) for b, f in data["needs"].items()}
    for own in own_catalogues(prompts, lenient):
        where = f"{OWN_DIR}/{own.path.name}"
        if own.features is not None and own.exercise in features:
            _twice(f"{where}: the features of '{own.exercise}' are also declared in coverage.toml [features]: declare them once", lenient)
        elif own.features is not None:
            features[own.exercise] = own.features
        for bug_id in own.bugs:
            if bug_id in needs:
                _twice(f"{where}: '{bug_id}' also has an entry in coverage.toml [needs]: an exercise's own bug needs only its id", lenient)
                continue
            needs[bug_id] = (own.exercise,)
    return features, needs


def own_families(prompts: Path) -> tuple[dict, ...]:
    """Every exercise's own [[family]] entries, after which they follow prompts/families.toml's."""
    return tuple(entry for own in own_catalogues(prompts) for entry in own.families)


def bug_in(exercise: Exercise | None, bug_id: str) -> Bug | None:
    """The catalogue's bug `bug_id` with `exercise`'s own texts ([[bug_texts]]) where it sets them."""
    shared = bugs().get(bug_id)
    own = next((t for t in exercise.bug_texts if t.bug == bug_id), None) if exercise is not None else None
    if shared is None or own is None:
        return shared
    changed = {k: getattr(own, k) for k in ("symptom", "fix", "test_idea", "fix_short") if getattr(own, k).strip()}
    return dataclasses.replace(shared, **changed)


def default_file(exercise_id: str) -> str:
    """The file `attn-kit start EXERCISE` writes without a FILE, and the name every suggestion of
    the kit (follow-ups, the next step, the README) uses: the id with dashes as underscores."""
    return exercise_id.replace("-", "_") + ".py"


def exercise(exercise_id: str) -> Exercise:
    """Look up an exercise, or raise UsageError listing the ids. Reads only that exercise's file
    when it exists (`check` on a file with an `# attn-kit:` header never parses the others)."""
    path = package_dir("prompts") / "exercises" / f"{exercise_id}.toml"
    if not exercises.cache_info().currsize and re.fullmatch(r"[a-z0-9][a-z0-9-]*", exercise_id) and path.is_file():
        return _load_once(path)
    found = exercises().get(exercise_id)
    if found is None:
        import difflib

        spelled = exercise_id.strip().lower().replace("_", "-").replace(" ", "-")
        close = [spelled] if spelled in exercises() else difflib.get_close_matches(spelled, list(exercises()), n=1)
        guess = f" Did you mean `{close[0]}`?" if close else ""
        raise UsageError(f"unknown exercise '{exercise_id}'.{guess} Exercises: {', '.join(exercises())}")
    return found
