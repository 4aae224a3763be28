"""`attn-kit dev check`: every invariant of the bundled content, checked in one pass.

The content is data (prompts/*.toml, solutions/<exercise>/...) joined by ids: an exercise names
its checks module and oracle, a hint names check ids, a bug file is named after a catalogue id and
marked `# BUG(id)`, a check declares the bugs it `catches`. A mistake in any of these joins shows
up late and far away (a diagnosis that never fires, a hint that points nowhere), so this module
checks them all at once. The test suite calls `run()`; CI and contributors run the command.

Each validator is a small function `validator(content) -> Iterable[Problem]`, registered with
@validator in the order they run. To add an invariant, add one; it should say what is wrong, where,
and what to do. `Content` says where the content lives, so tests can point it at a broken copy.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from attn_kit.base import safefile
from attn_kit.base.errors import CatalogError, DependencyMissing, FamilyError, UsageError
from attn_kit.base.paths import bug_id_of, package_dir
from attn_kit.dev import readme as readme_tables
from attn_kit.diagnosis import compose
from attn_kit.grading import rubric
from attn_kit.load import catalog

if TYPE_CHECKING:
    from attn_kit.compare.registry import Suite

ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
BUG_FILE = re.compile(r"(?P<id>[a-z0-9]+(-[a-z0-9]+)*)(@(?P<form>[a-z0-9]+(-[a-z0-9]+)*))?\.py")
MARKER_WINDOW = 10  # lines a change may reach from its BUG(id) marker (one change can span a few statements)
IGNORED = {"__pycache__", ".DS_Store"}
PLACEHOLDER = "TODO(dev new)"  # marks what `attn-kit dev new` leaves for the contributor to write
_PLACEHOLDER_TEXT = re.compile(re.escape(PLACEHOLDER) + r":?([^\"'\n]*)")  # what to write: up to a quote


@dataclass(frozen=True)
class Problem:
    where: str  # a path relative to the package data, or an id
    message: str  # what is wrong and what to do

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Content:
    """Where the content lives (the installed package by default) and what loads from it."""

    prompts: Path
    solutions: Path
    notes: list[str] = field(default_factory=list)  # things not checked here, and why
    checks_dir: Path | None = None  # the checks/ modules (default: the installed ones)
    readme: Path | None = None  # default: README.md beside prompts/ in a checkout

    @classmethod
    def installed(cls) -> "Content":
        return cls(package_dir("prompts"), package_dir("solutions"))

    @property
    def checks(self) -> Path:
        return self.checks_dir or package_dir("checks")

    @property
    def readme_file(self) -> Path | None:
        path = self.readme or self.prompts.parent / "README.md"
        return path if path.is_file() else None

    @property
    def catalogue_doc(self) -> Path | None:
        """docs/catalogue.md beside the README, in a source checkout (None in an installed copy, or
        a copy of the content with a README but no docs/ folder)."""
        readme = self.readme_file
        path = readme.parent / readme_tables.CATALOGUE_DOC if readme is not None else None
        return path if path is not None and path.parent.is_dir() else None

    def relative(self, path: Path) -> str:
        for root in (self.prompts, self.solutions):
            if path.is_relative_to(root):
                return f"{root.name}/{path.relative_to(root)}"
        return str(path)

    @cached_property
    def exercises(self) -> dict[str, catalog.Exercise]:
        """The exercises that load (a file that does not is reported by `toml_files_load`)."""
        found = {}
        for path in sorted((self.prompts / "exercises").glob("*.toml")):
            try:
                exercise = catalog.load_exercise(path)
            except CatalogError:
                continue
            found[exercise.id] = exercise
        return found

    @cached_property
    def properties(self) -> tuple[catalog.Property, ...]:
        """The README's headline properties (prompts/properties.toml); () when it does not load."""
        try:
            return catalog.load_properties(self.prompts / PROPERTIES_FILE)
        except (CatalogError, OSError):
            return ()

    @cached_property
    def bugs(self) -> dict[str, catalog.Bug]:
        try:
            return catalog.load_catalogue_bugs(self.prompts, lenient=True)  # toml_files_load reports the rest
        except (CatalogError, OSError):
            return {}

    def own_catalogue_files(self) -> list[Path]:
        """prompts/catalogue/<exercise>.toml: each exercise's own part of the catalogue."""
        return catalog.own_catalogue_files(self.prompts)

    def suite(self, exercise: catalog.Exercise) -> Suite | None:
        """The exercise's graded suite, or None (with a note) when it cannot be imported here."""
        from attn_kit.grading import pipeline

        try:
            return pipeline.suite_for(exercise)
        except DependencyMissing as exc:
            note = f"{exercise.id}: suite not checked: {exc}"
            if note not in self.notes:
                self.notes.append(note)
            return None
        except (ImportError, AttributeError):
            return None  # no such module, or no SUITE in it: every_suite_belongs_to_an_exercise says so

    def bug_files(self, exercise_id: str) -> list[Path]:
        return sorted((self.solutions / exercise_id / "bugs").glob("*.py"))

    def reference_files(self, exercise_id: str) -> list[Path]:
        return sorted((self.solutions / exercise_id).glob("reference_*.py"))


Validator = Callable[[Content], Iterable[Problem]]
VALIDATORS: list[Validator] = []


def validator(fn: Validator) -> Validator:
    """Register an invariant of the content; validators run in the order they are declared."""
    VALIDATORS.append(fn)
    return fn


@dataclass
class Result:
    problems: list[Problem]
    notes: list[str]
    checked: list[str]  # validator names, in order

    @property
    def ok(self) -> bool:
        return not self.problems


def run(content: Content | None = None, validators: Iterable[Validator] | None = None) -> Result:
    """Run every validator (or the given ones) over the content; never raises for bad content."""
    content = content or Content.installed()
    chosen = list(VALIDATORS if validators is None else validators)
    problems: list[Problem] = []
    for check in chosen:
        problems.extend(check(content))
    return Result(problems, list(content.notes), [v.__name__ for v in chosen])


# --- a skeleton from `dev new` is filled in ----------------------------------------------------


@validator
def no_placeholders_left(content: Content) -> Iterable[Problem]:
    """No file of an exercise still holds a placeholder of `attn-kit dev new`'s skeleton: each
    one left is reported with its line, which says what to write there."""
    for path in sorted((content.prompts / "exercises").glob("*.toml")):
        exercise = content.exercises.get(path.stem)
        files = [path, content.prompts / catalog.OWN_DIR / path.name]
        if exercise is not None:
            files.append(content.checks / f"{exercise.checks}.py")
            files += content.reference_files(exercise.id) + content.bug_files(exercise.id)
        for file in files:
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except OSError:
                continue  # a missing file is reported by the validators that need it
            where = content.relative(file) if file.parent != content.checks else f"checks/{file.name}"
            for n, line in enumerate(lines, 1):
                for what in _PLACEHOLDER_TEXT.findall(line):
                    yield Problem(where, f"line {n}: fill in the placeholder: {what.strip(' .') or 'see the line'}")


# --- TOML files, fields and ids -------------------------------------------------------------------


@validator
def toml_files_load(content: Content) -> Iterable[Problem]:
    """Every TOML file parses, has `format = 1`, and has no unknown or missing key."""
    for path in sorted((content.prompts / "exercises").glob("*.toml")):
        try:
            catalog.load_exercise(path)
        except CatalogError as exc:
            yield Problem(content.relative(path), str(exc))
    path = content.prompts / "bugs.toml"
    try:
        catalog.load_bugs(path)
    except (CatalogError, OSError) as exc:
        yield Problem(content.relative(path), str(exc))
    path = content.prompts / PROPERTIES_FILE
    try:
        catalog.load_properties(path)
    except (CatalogError, OSError) as exc:
        yield Problem(content.relative(path), str(exc))
    yield from _own_catalogues_load(content)


def _own_catalogues_load(content: Content) -> Iterable[Problem]:
    """Each prompts/catalogue/<id>.toml loads, and merges with the shared files: no bug id, [[family]]
    or [features] entry defined in two places."""
    loaded = True
    for path in content.own_catalogue_files():
        try:
            catalog.load_own_catalogue(path)
        except CatalogError as exc:
            loaded = False
            yield Problem(content.relative(path), str(exc).removeprefix(f"{catalog.OWN_DIR}/{path.name}").lstrip(": "))
    if not loaded:
        return
    for merge in (catalog.load_catalogue_bugs, catalog.load_coverage):
        try:
            merge(content.prompts)
        except CatalogError as exc:
            where, _, message = str(exc).partition(": ")
            yield Problem(f"prompts/{where}" if where.startswith(catalog.OWN_DIR) else where, message)
        except OSError:
            pass  # a shared file that is missing is reported above


def _catalogue_entries(content: Content) -> Iterable[tuple[Path, int, dict]]:
    """(file, 1-based index, raw [[bugs]] entry) of prompts/bugs.toml, then of each exercise's own
    file (a file that does not parse is reported by toml_files_load)."""
    for path in [content.prompts / "bugs.toml", *content.own_catalogue_files()]:
        try:
            entries = tomllib.loads(path.read_text(encoding="utf-8")).get("bugs", [])
        except (tomllib.TOMLDecodeError, OSError):
            continue
        for n, entry in enumerate(entries, 1):
            yield path, n, entry


def _fix_short_fits(where: str, what: str, phrase: str) -> Iterable[Problem]:
    """A fix_short is one phrase the first screen can give in its cause's one or two lines."""
    if len(phrase.strip()) > catalog.FIX_SHORT_MOST:
        yield Problem(where, f"{what}: fix_short has {len(phrase.strip())} characters, more than {catalog.FIX_SHORT_MOST} (one phrase)")
    if "\n" in phrase or phrase.strip().endswith("."):
        yield Problem(where, f"{what}: fix_short is one phrase on one line, without a final full stop")


@validator
def bug_catalogue_ids(content: Content) -> Iterable[Problem]:
    """Bug ids are unique lowercase-dashed words across prompts/bugs.toml and the exercises' own
    files, and every entry's texts are filled in."""
    seen: dict[str, str] = {}
    titles: dict[str, str] = {}
    for path, n, entry in _catalogue_entries(content):
        bug_id = str(entry.get("id", ""))
        where = f"{content.relative(path)} [bugs] #{n}"
        if not ID.fullmatch(bug_id):
            yield Problem(where, f"id '{bug_id}' is not lowercase words joined by dashes")
        if bug_id in seen:
            yield Problem(where, f"id '{bug_id}' is declared twice (first in {seen[bug_id]})")
            continue  # its texts were checked with the first
        seen[bug_id] = content.relative(path)
        for key in ("title", "symptom", "fix", "fix_short", "test_idea", "concept"):
            if not str(entry.get(key, "")).strip():
                yield Problem(where, f"'{key}' is empty")
        yield from _fix_short_fits(where, f"'{bug_id}'", str(entry.get("fix_short", "")))
        title = " ".join(str(entry.get("title", "")).split())
        if title and title in titles:
            yield Problem(where, f"title '{title}' is also {titles[title]}'s: every bug needs its own")
        titles.setdefault(title, bug_id)
        if entry.get("severity") not in catalog.SEVERITIES:
            yield Problem(
                where,
                f"severity '{entry.get('severity', '')}' is not one of {', '.join(catalog.SEVERITIES)} "
                f"(the header of bugs.toml says which; the mock's correctness score needs it)",
            )


@validator
def exercise_ids_and_order(content: Content) -> Iterable[Problem]:
    """Exercise ids are lowercase-dashed words and no two exercises share an `order`."""
    orders: dict[int, str] = {}
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        if not ID.fullmatch(exercise.id):
            yield Problem(where, f"id '{exercise.id}' is not lowercase words joined by dashes")
        if exercise.order in orders:
            yield Problem(where, f"order {exercise.order} is also {orders[exercise.order]}'s")
        orders[exercise.order] = exercise.id


@validator
def exercise_code_fields(content: Content) -> Iterable[Problem]:
    """The starter's header names the exercise, `main` is one of its functions, `oracle` exists."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        if not exercise.starter.startswith(f"# attn-kit: {exercise.id}\n"):
            yield Problem(where, f"the starter must begin with '# attn-kit: {exercise.id}'")
        if exercise.main not in exercise.function_names:
            yield Problem(where, f"main = '{exercise.main}' is not one of its [[functions]]")
        if not (content.solutions / exercise.id / exercise.oracle).is_file():
            yield Problem(where, f"oracle = '{exercise.oracle}' is not a file in solutions/{exercise.id}/")


MIN_HINTS = 3  # a ladder: a nudging question, the concept, nearly the code
MIN_QUESTIONS = 3  # enough discussion for a mock screen's last minutes


@validator
def exercise_has_enough_to_teach(content: Content) -> Iterable[Problem]:
    """A statement and summary, at least MIN_HINTS hints with text and MIN_QUESTIONS questions."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        for name in ("statement", "summary", "title"):
            if not getattr(exercise, name).strip():
                yield Problem(where, f"'{name}' is empty")
        if len(exercise.hints) < MIN_HINTS:
            yield Problem(
                where, f"has {len(exercise.hints)} [[hints]]; write at least {MIN_HINTS} (a nudging question, the concept, nearly the code)"
            )
        for n, hint in enumerate(exercise.hints, 1):
            if not hint.text.strip():
                yield Problem(where, f"hint {n} ('{hint.title}') has no text")
        if len(exercise.questions) < MIN_QUESTIONS:
            yield Problem(where, f"has {len(exercise.questions)} [[questions]]; write at least {MIN_QUESTIONS}")


@validator
def exercise_questions_and_scoring(content: Content) -> Iterable[Problem]:
    """Question ids are unique and the rubric has four anchors per known dimension (`required` is
    checked with the other question rules below)."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        ids = [q.id for q in exercise.questions]
        for dup in sorted({i for i in ids if ids.count(i) > 1}):
            yield Problem(where, f"question id '{dup}' is used twice")
        for d in exercise.scoring:
            if d.dimension not in catalog.DIMENSIONS:
                yield Problem(where, f"[[scoring]] dimension '{d.dimension}' is not one of {', '.join(catalog.DIMENSIONS)}")
        yield from (Problem(where, text) for text in scoring_problems(exercise))


def scoring_problems(exercise: catalog.Exercise) -> list[str]:
    """The rubric the mock scores with: every dimension once, in DIMENSIONS order, with four distinct
    anchors; correctness anchors describe rubric.correctness's levels in order (each starts with its
    rubric.CORRECTNESS_LEADS entry), so the auto-score and the written anchor agree."""
    problems = []
    dims = [d.dimension for d in exercise.scoring]
    if dims != list(catalog.DIMENSIONS):
        problems.append(
            f"[[scoring]] dimensions are {', '.join(dims) or 'none'}; the mock needs each of "
            f"{', '.join(catalog.DIMENSIONS)} once, in that order"
        )
    for d in exercise.scoring:
        texts = [" ".join(a.split()) for a in d.anchors]
        if len(texts) != len(rubric.CORRECTNESS_LEADS):
            problems.append(
                f"[[scoring]] '{d.dimension}' has {len(texts)} anchors, not {len(rubric.CORRECTNESS_LEADS)} (one per score, 1 to 4)"
            )
        if any(not t for t in texts) or len(set(texts)) != len(texts):
            problems.append(f"[[scoring]] '{d.dimension}': every anchor must be filled in and differ from the others")
        if d.dimension == "correctness" and len(texts) == len(rubric.CORRECTNESS_LEADS):
            for score, (text, lead) in enumerate(zip(texts, rubric.CORRECTNESS_LEADS), 1):
                if not text.startswith(lead):
                    problems.append(
                        f"[[scoring]] correctness anchor {score} must start with '{lead}' (the level "
                        f"the auto-score gives; see kit/grading/rubric.py)"
                    )
    return problems


# What a gentle first hint must not contain: each pattern is one way code shows up in prose.
CODE_PATTERNS = (
    re.compile(r"`"),  # inline code or a fence
    re.compile(r"^\s{4,}\S", re.MULTILINE),  # an indented (Markdown) code block
    re.compile(r"\b[A-Za-z_]\w*\s*\("),  # a call: name(
    re.compile(r"\b[A-Za-z_]\w*\.[A-Za-z_]\w*"),  # an attribute: np.exp, x.shape
    re.compile(r"\w\s*(?:@|[+\-*/@]=)\s*\w"),  # a matmul or an augmented assignment
    re.compile(r"(?<![<>=!])=(?!=)\s*[\w.]*[(\[]"),  # an assignment of a call or a list ("T = 4" is prose)
    re.compile(r"\[[^\]]*:[^\]]*\]"),  # a slice
    re.compile(r"\b(def|import|lambda) \w|\bfor [a-z_]\w* in \w+\("),  # keywords that start code
)


def looks_like_code(text: str) -> str:
    """The first code-like fragment in `text`, or '' when it reads as plain prose."""
    for pattern in CODE_PATTERNS:
        found = pattern.search(text)
        if found:
            return found.group(0)
    return ""


def question_rule_problems(question: catalog.Question) -> list[str]:
    """A discussion question has at least two non-empty key points, one or two of them required
    (distinct indexes of existing key points)."""
    problems = []
    q = question
    if len(q.key_points) < 2 or not all(p.strip() for p in q.key_points):
        problems.append(f"question '{q.id}' needs at least two non-empty key points")
    if not 1 <= len(q.required) <= 2:
        problems.append(f"question '{q.id}' marks {len(q.required)} key points required (1 or 2)")
    if len(set(q.required)) != len(q.required) or not all(0 <= i < len(q.key_points) for i in q.required):
        problems.append(f"question '{q.id}' has required indexes {list(q.required)} outside its key points")
    return problems


@validator
def questions_require_key_points_and_hints_start_gentle(content: Content) -> Iterable[Problem]:
    """Every question marks one or two of its key points required, and level 1 of every hint ladder
    contains no code (`attn-kit hint` promises gentlest first)."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        for q in exercise.questions:
            for message in question_rule_problems(q):
                yield Problem(where, message)
        code = looks_like_code(exercise.hints[0].text) if exercise.hints else ""
        if code:
            yield Problem(
                where,
                f"hint 1 ('{exercise.hints[0].title}') contains code ({code!r}): level 1 nudges in prose, code belongs to later hints",
            )


def hint_ladder_problems(exercise: catalog.Exercise) -> list[str]:
    """The ladder climbs from a nudge to near-code (level 1's code is questions_require_...'s).

    Every hint names the scored dimension (DIMENSIONS) that using it caps at 3. When the hints
    declare steps (question, concept, code): every question comes before every concept and every
    concept before every near-code hint, so "gentlest first" holds for the whole ladder; a
    question asks something and contains no code; each topic (title) has the three steps in order
    with one concept and one dimension."""
    hints, problems = exercise.hints, []
    for level, hint in enumerate(hints, 1):
        if hint.dimension not in catalog.DIMENSIONS:
            problems.append(f"hint {level} caps dimension '{hint.dimension}' (one of {catalog.DIMENSIONS})")
    if not any(h.step for h in hints):
        return problems
    return problems + _step_problems(hints) + _topic_problems(hints)


def _step_problems(hints: tuple[catalog.Hint, ...]) -> list[str]:
    problems, ranks = [], []
    for level, hint in enumerate(hints, 1):
        if hint.step not in catalog.HINT_STEPS:
            problems.append(f"hint {level} has step '{hint.step}' (one of {catalog.HINT_STEPS})")
            continue
        ranks.append(catalog.HINT_STEPS.index(hint.step))
        code = looks_like_code(hint.text) if hint.step == "question" and level > 1 else ""  # 1: reported apart
        if code:
            problems.append(f"hint {level} is a question but contains code ({code!r})")
        if hint.step == "question" and "?" not in hint.text:
            problems.append(f"hint {level} is a question but asks nothing")
    if ranks != sorted(ranks):
        problems.append(f"hints are not ordered question, concept, code: {[h.step for h in hints]}")
    for level, hint in enumerate(hints, 1):
        if hint.step == "code" and not code_lines(hint.text):
            problems.append(f"hint {level} is near-code but holds no code block (indent it by four spaces)")
    return problems


def _topic_problems(hints: tuple[catalog.Hint, ...]) -> list[str]:
    problems = []
    topics: dict[str, list[catalog.Hint]] = {}
    for hint in hints:
        topics.setdefault(hint.title, []).append(hint)
    for title, ladder in topics.items():
        if [h.step for h in ladder] != list(catalog.HINT_STEPS):
            problems.append(
                f"topic '{title}' climbs {[h.step for h in ladder]}, not {list(catalog.HINT_STEPS)} (the hints of a topic share its title)"
            )
        if len({h.concept for h in ladder}) != 1 or len({h.dimension for h in ladder}) != 1:
            problems.append(f"topic '{title}' mixes concepts or dimensions across its steps")
    return problems


WATCH_ITEMS = 3  # what-to-watch-for items an exercise gives the interviewer


def screen_problems(exercise: catalog.Exercise) -> list[str]:
    """What to watch for (at least WATCH_ITEMS [[rubric]] items, each with its why: `mock --help`
    promises the section), time checkpoints rising within the screen, seniority expectations,
    and every follow-up carries the answer a strong candidate gives."""
    problems = []
    if len(exercise.rubric) < WATCH_ITEMS or not all(item.watch_for.strip() and item.why.strip() for item in exercise.rubric):
        problems.append(f"needs at least {WATCH_ITEMS} [[rubric]] items (watch_for and why): the interviewer sheet's 'What to watch for'")
    minutes = [c.minute for c in exercise.checkpoints]
    if not minutes or minutes != sorted(set(minutes)) or minutes[0] <= 0 or minutes[-1] > exercise.minutes:
        problems.append(f"[[checkpoints]] at minutes {minutes} must rise strictly within {exercise.minutes} minutes")
    if not exercise.seniority:
        problems.append("no [[seniority]] expectations")
    problems += [f"follow-up '{f.prompt[:40]}…' has no expected answer" for f in exercise.followups if not f.answer.strip()]
    return problems


@validator
def hint_ladders_climb_and_screens_are_complete(content: Content) -> Iterable[Problem]:
    """hint_ladder_problems and screen_problems, for every exercise."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        for message in hint_ladder_problems(exercise) + screen_problems(exercise):
            yield Problem(where, message)


@validator
def exercise_links(content: Content) -> Iterable[Problem]:
    """Follow-ups name existing exercises; hint concepts are concepts of some bug or question."""
    concepts = {b.concept for b in content.bugs.values()}
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        for f in exercise.followups:
            if f.exercise and f.exercise not in content.exercises:
                yield Problem(where, f"follow-up names unknown exercise '{f.exercise}'")
        if content.bugs:
            known = concepts | {q.concept for q in exercise.questions}
            for concept in sorted({h.concept for h in exercise.hints if h.concept} - known):
                yield Problem(where, f"a hint's concept '{concept}' is no bug's or question's concept")


@validator
def bug_texts_reword_bugs_of_the_exercise(content: Content) -> Iterable[Problem]:
    """Every [[bug_texts]] entry rewords a catalogue bug that has a file in this exercise, once,
    and sets at least one text (symptom, fix or test_idea)."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        present = {bug_id_of(p) for p in content.bug_files(exercise.id)}
        seen: set[str] = set()
        for entry in exercise.bug_texts:
            if entry.bug not in content.bugs or entry.bug not in present:
                yield Problem(where, f"[[bug_texts]] '{entry.bug}' is not a catalogue bug with a file under solutions/{exercise.id}/bugs/")
            if entry.bug in seen:
                yield Problem(where, f"[[bug_texts]] '{entry.bug}' is given twice")
            seen.add(entry.bug)
            if not any(t.strip() for t in (entry.symptom, entry.fix, entry.test_idea, entry.fix_short)):
                yield Problem(where, f"[[bug_texts]] '{entry.bug}' sets no text (symptom, fix, fix_short or test_idea)")
            if entry.fix.strip() and not entry.fix_short.strip():
                yield Problem(where, f"[[bug_texts]] '{entry.bug}' rewords fix but not fix_short (the first screen's phrase)")
            yield from _fix_short_fits(where, f"[[bug_texts]] '{entry.bug}'", entry.fix_short)


CONCEPTS_FILE = "concepts.toml"  # prompts/concepts.toml: [concept_words] and [bug_words]


def word_sources(content: Content) -> list[tuple[Path, dict, set[str] | None]]:
    """(file, its word tables, the bugs it may give words to: None for any) for prompts/concepts.toml
    and each exercise's own file (its own bugs only); a file that does not load is left out."""
    found: list[tuple[Path, dict, set[str] | None]] = []
    try:
        found.append((content.prompts / CONCEPTS_FILE, tomllib.loads((content.prompts / CONCEPTS_FILE).read_text(encoding="utf-8")), None))
    except (OSError, tomllib.TOMLDecodeError):
        pass
    for own in catalog.own_catalogues(content.prompts, lenient=True):
        found.append((own.path, own.words, set(own.bugs)))
    return found


def merged_words(content: Content, table: str) -> dict:
    """One table of prompts/concepts.toml with the exercises' own entries (the first definition stands)."""
    merged: dict = {}
    for _, data, _ in word_sources(content):
        for key, value in dict(data.get(table, {})).items():
            merged.setdefault(key, value)
    return merged


def concept_words(content: Content) -> tuple[dict[str, str], dict[str, str]]:
    """({concept: words a question on it uses}, {bug id: words one of its questions uses}), from
    prompts/concepts.toml and the exercises' own files (regular expressions); empty tables when
    nothing loads."""
    return merged_words(content, "concept_words"), merged_words(content, "bug_words")


def question_text(question: catalog.Question) -> str:
    return " ".join(" ".join((question.prompt, *question.key_points)).split())


def concept_questions(content: Content, exercise_id: str, concept: str) -> list[tuple[str, catalog.Question]]:
    """The cards a concept stands for, as review.concept_questions picks them: this exercise's
    questions on it, else any exercise's."""
    own = [(exercise_id, q) for q in content.exercises[exercise_id].questions if q.concept == concept]
    return own or [(e.id, q) for e in content.exercises.values() for q in e.questions if q.concept == concept]


@validator
def bugs_reach_questions_that_teach_them(content: Content) -> Iterable[Problem]:
    """Every bug file's bug reaches review questions on its concept (prompts/concepts.toml's
    [concept_words]), and one of them names the bug itself ([bug_words])."""
    concepts, bugs = concept_words(content)
    for exercise in content.exercises.values():
        for bug_id in sorted({bug_id_of(p) for p in content.bug_files(exercise.id)} & set(content.bugs)):
            concept = content.bugs[bug_id].concept
            where = f"{exercise.id}: {bug_id} ({concept})"
            words = concepts.get(concept)
            if words is None:
                yield Problem(
                    where,
                    f"concept '{concept}' has no entry in prompts/{CONCEPTS_FILE} [concept_words]: add the words a question on it must use",
                )
                continue
            reached = concept_questions(content, exercise.id, concept)
            if not reached:
                yield Problem(where, f"reaches no question: write a [[questions]] with concept = '{concept}'")
            for owner, question in reached:
                if not re.search(words, question_text(question), re.IGNORECASE):
                    yield Problem(
                        where,
                        f"reaches {owner}/{question.id}, which is not about {concept} (its prompt and key points match none of {words!r})",
                    )
            own = bugs.get(bug_id)
            if own and reached and not any(re.search(own, question_text(q)) for _, q in reached):
                yield Problem(where, f"reaches {[q.id for _, q in reached]}, none of which mentions the bug ({own!r})")


def hint_words(content: Content) -> dict[str, tuple[str, str]]:
    """{bug id: (words of the nudging question, words of the concept step)}: prompts/concepts.toml's
    [hint_words] and the exercises' own; an entry that is not two strings is left out
    (_concept_file_problems says so)."""
    return {
        bug_id: (words[0], words[1])
        for bug_id, words in merged_words(content, "hint_words").items()
        if isinstance(words, list) and len(words) == 2 and all(isinstance(w, str) for w in words)
    }


def climbs_in_steps(exercise: catalog.Exercise) -> bool:
    """Its hints declare steps (question, concept, code): hint_ladder_problems holds them to it."""
    return any(h.step for h in exercise.hints)


def hint_teaches(exercise: catalog.Exercise, level: int, words: tuple[str, str]) -> bool:
    """The topic of hint `level` matches the question words at its question step and the concept
    words at its concept step."""
    title = exercise.hints[level - 1].title
    ladder = {h.step: " ".join(h.text.split()) for h in exercise.hints if h.title == title}
    return all(re.search(pattern, ladder.get(step, ""), re.IGNORECASE | re.DOTALL) for step, pattern in zip(("question", "concept"), words))


def hint_link_problems(content: Content, exercise: catalog.Exercise) -> list[str]:
    """For each bug of [hint_words] with a bug file here: the hint grading points it at
    (grading.hint_for_bug) is a question whose topic names and explains the bug."""
    words = hint_words(content)
    bug_ids = sorted({bug_id_of(p) for p in content.bug_files(exercise.id)} & set(words))
    suite = content.suite(exercise) if bug_ids and climbs_in_steps(exercise) else None
    if suite is None:
        return []
    from attn_kit.grading.pipeline import hint_for_bug

    problems = []
    for bug_id in bug_ids:
        level = hint_for_bug(exercise, suite.checks, bug_id)
        if level is None:
            problems.append(f"{bug_id} reaches no hint: name one of its checks in a hint's checks")
        elif exercise.hints[level - 1].step != "question":
            problems.append(f"{bug_id} reaches hint {level}, not the gentle question first")
        elif not hint_teaches(exercise, level, words[bug_id]):
            problems.append(
                f"{bug_id} reaches '{exercise.hints[level - 1].title}', whose question and concept "
                f"do not name it (prompts/{CONCEPTS_FILE} [hint_words]: {list(words[bug_id])!r})"
            )
    return problems


@validator
def bugs_reach_hints_that_name_them(content: Content) -> Iterable[Problem]:
    """hint_link_problems for every exercise whose hints climb in steps, and every entry of
    prompts/concepts.toml is a valid regular expression ([hint_words]: two, for a catalogue bug)."""
    yield from _concept_file_problems(content)
    for exercise in content.exercises.values():
        for message in hint_link_problems(content, exercise):
            yield Problem(content.relative(exercise.path), message)


def _concept_file_problems(content: Content) -> Iterable[Problem]:
    where = f"prompts/{CONCEPTS_FILE}"
    try:
        tomllib.loads((content.prompts / CONCEPTS_FILE).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        yield Problem(where, f"does not load: {exc}")
        return
    seen: dict[tuple[str, str], str] = {}
    for path, data, own_bugs in word_sources(content):
        where = content.relative(path)
        for table in catalog.WORD_TABLES:
            for key in dict(data.get(table, {})):
                if (table, key) in seen:
                    yield Problem(where, f"[{table}] {key} is also defined in {seen[table, key]}: define it once")
                seen.setdefault((table, key), where)
                if own_bugs is not None and table != "concept_words" and key not in own_bugs:
                    yield Problem(
                        where, f"[{table}] {key} is not one of this exercise's own bugs: its words belong in prompts/{CONCEPTS_FILE}"
                    )
        yield from _word_table_problems(content, where, data)


def _word_table_problems(content: Content, where: str, data: dict) -> Iterable[Problem]:
    for table in catalog.WORD_TABLES:
        for key, value in dict(data.get(table, {})).items():
            patterns = value if table == "hint_words" else [value]
            if table == "hint_words" and content.bugs and key not in content.bugs:
                yield Problem(where, f"[{table}] {key} is not a bug of prompts/bugs.toml")
            if not (
                isinstance(patterns, list)
                and len(patterns) == (2 if table == "hint_words" else 1)
                and all(isinstance(w, str) for w in patterns)
            ):
                yield Problem(
                    where,
                    f"[{table}] {key} must be " + ("two strings: [question words, concept words]" if table == "hint_words" else "a string"),
                )
                continue
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    yield Problem(where, f"[{table}] {key}: {pattern!r} is not a regular expression ({exc})")


# The widest code line each kind of content shows whole on an 80-column terminal: 80 minus the
# indent it is printed at and the column rich's code block pads each side with (render/content.py;
# tests/test_content_render.py holds these numbers against the renderer).
CODE_WIDTH = {"statement": 78, "hint": 76, "answer": 74}


def code_lines(text: str) -> list[str]:
    """The lines of the Markdown code blocks (indented or fenced) in `text`, as rich parses them."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt().parse(text)
    return [line for t in tokens if t.type in ("code_block", "fence") for line in t.content.splitlines()]


@validator
def code_fits_an_80_column_terminal(content: Content) -> Iterable[Problem]:
    """Every code line of a statement, hint or model answer shows whole at 80 columns: a longer
    one wraps in the middle of the code."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        texts = [("statement", "the statement", exercise.statement)]
        texts += [("hint", f"hint {n}", h.text) for n, h in enumerate(exercise.hints, 1)]
        texts += [("answer", f"question '{q.id}'", q.answer) for q in exercise.questions]
        for kind, name, text in texts:
            for line in code_lines(text):
                if len(line) > CODE_WIDTH[kind]:
                    yield Problem(
                        where,
                        f"{name} has a code line of {len(line)} characters, over the "
                        f"{CODE_WIDTH[kind]} that show whole at 80 columns "
                        f"({line.strip()[:40]!r}…): split it, or put its comment on "
                        "the line above",
                    )


@validator
def every_reference_starts_with_its_header(content: Content) -> Iterable[Problem]:
    """Each exercise has a reference, and every reference and bug file starts `# attn-kit: <id>`."""
    for exercise in content.exercises.values():
        references = content.reference_files(exercise.id)
        if not references:
            yield Problem(f"solutions/{exercise.id}", "has no reference_*.py")
        for path in references + content.bug_files(exercise.id):
            if not path.read_text(encoding="utf-8").startswith(f"# attn-kit: {exercise.id}\n"):
                yield Problem(content.relative(path), f"must begin with '# attn-kit: {exercise.id}'")


# --- bug files ------------------------------------------------------------------------------------


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, text) of the file's lines outside the module docstring, which
    describes the bug in prose and so always differs from the reference's."""
    first, end = compose.docstring_span(text)
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if not first < n <= end]


def unmarked_changes(bug_text: str, reference_text: str, bug_id: str) -> list[int]:
    """Lines of the bug file that differ from the reference more than MARKER_WINDOW lines away
    from a `BUG(bug_id)` marker (module docstrings aside). A deletion counts at the line where it
    happened. Empty when every change is marked."""
    bug, ref = _code_lines(bug_text), _code_lines(reference_text)
    markers = [n for n, line in bug if f"BUG({bug_id})" in line]
    far = []
    matcher = difflib.SequenceMatcher(None, [t for _, t in ref], [t for _, t in bug], autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        for j in range(j1, max(j2, j1 + 1)):
            line = bug[min(j, len(bug) - 1)][0] if bug else 1
            if not any(abs(line - m) <= MARKER_WINDOW for m in markers):
                far.append(line)
    return far


def applicable_bugs(content: Content, exercise_id: str) -> set[str] | None:
    """The catalogue bugs prompts/coverage.toml (with the exercises' own files) says can be made in
    the exercise: those whose needed features it has (its own id counts as one); None when the
    coverage does not load."""
    try:
        features, needs = catalog.load_coverage(content.prompts, lenient=True)  # toml_files_load reports the rest
        have = set(features.get(exercise_id, ())) | {exercise_id}
        return {b for b, need in needs.items() if set(need) <= have and b in content.bugs}
    except (OSError, CatalogError, KeyError, AttributeError, TypeError):
        return None


@validator
def bug_files_match_the_coverage_table(content: Content) -> Iterable[Problem]:
    """Every bug prompts/coverage.toml says can be made in an exercise has a bug file there, and
    every bug file is for such a bug (tests/test_catalogue.py then grades each one)."""
    for exercise in content.exercises.values():
        applies = applicable_bugs(content, exercise.id)
        if applies is None:
            yield Problem("prompts/coverage.toml", "does not load: expected format = 1, [features] and [needs]")
            return
        have = {bug_id_of(p) for p in content.bug_files(exercise.id)}
        for bug_id in sorted(applies - have):
            yield Problem(
                f"solutions/{exercise.id}", f"has no bugs/{bug_id}.py, though prompts/coverage.toml says the bug can be made here"
            )
        for bug_id in sorted(have - applies):
            yield Problem(
                f"solutions/{exercise.id}/bugs/{bug_id}.py",
                f"is a bug prompts/coverage.toml says cannot be made here: add the features it needs to [features] {exercise.id}",
            )


@validator
def every_exercise_has_a_bug_file(content: Content) -> Iterable[Problem]:
    """Each exercise has at least one known-bug file: the catalogue's proof needs one per exercise."""
    for exercise in content.exercises.values():
        if not content.bug_files(exercise.id):
            yield Problem(f"solutions/{exercise.id}", "has no bugs/<bug-id>.py: every exercise has a known bug")


@validator
def bug_files_are_one_marked_change(content: Content) -> Iterable[Problem]:
    """Every bug file is named <bug-id>[@<form>].py after a catalogue id, carries its BUG(id)
    marker, and differs from one of the references only around that marker."""
    for exercise in content.exercises.values():
        references = {p.name: p.read_text(encoding="utf-8") for p in content.reference_files(exercise.id)}
        texts: dict[str, str] = {}
        for path in content.bug_files(exercise.id):
            where = content.relative(path)
            if not BUG_FILE.fullmatch(path.name):
                yield Problem(where, "a bug file is named <bug-id>.py or <bug-id>@<form>.py")
                continue
            bug_id = bug_id_of(path)
            text = path.read_text(encoding="utf-8")
            if content.bugs and bug_id not in content.bugs:
                yield Problem(where, f"'{bug_id}' is not in prompts/bugs.toml")
            if not any(f"BUG({bug_id})" in line for _, line in _code_lines(text)):
                yield Problem(where, f"no '# BUG({bug_id})' marker in the code")
                continue
            if text in texts.values():
                yield Problem(where, "is a copy of another bug file")
            texts[path.name] = text
            if not references:
                continue
            if text in references.values():
                yield Problem(where, "is identical to a reference")
                continue
            scored = sorted((len(unmarked_changes(text, ref, bug_id)), name) for name, ref in references.items())
            count, closest = scored[0]
            if count:
                lines = unmarked_changes(text, references[closest], bug_id)
                shown = ", ".join(map(str, lines[:5])) + (" ..." if len(lines) > 5 else "")
                yield Problem(
                    where,
                    f"differs from {closest} away from its BUG({bug_id}) marker "
                    f"(line {shown}): a bug file is the reference with one marked change",
                )


# --- checks, hints, bugs --------------------------------------------------------------------------


@validator
def hints_name_existing_checks(content: Content) -> Iterable[Problem]:
    """Every check id a hint names is a check of the exercise's suite."""
    for exercise in content.exercises.values():
        suite = content.suite(exercise)
        if suite is None:
            continue
        ids = {c.id for c in suite.checks}
        for n, hint in enumerate(exercise.hints, 1):
            for check_id in hint.checks:
                if check_id not in ids:
                    yield Problem(content.relative(exercise.path), f"hint {n} ('{hint.title}') names unknown check '{check_id}'")


@validator
def last_hint_points_to_locate(content: Content) -> Iterable[Problem]:
    """The last rung of every hint ladder points to `attn-kit check FILE --locate`, the one step
    past the hints that still leaves the fix to the candidate."""
    for exercise in content.exercises.values():
        if exercise.hints and "attn-kit check FILE --locate" not in exercise.hints[-1].text:
            yield Problem(
                content.relative(exercise.path),
                f"the last hint ('{exercise.hints[-1].title}') does not point to `attn-kit check FILE --locate`",
            )


@validator
def suites_match_their_exercise(content: Content) -> Iterable[Problem]:
    """The suite's exercise id is the exercise's, and its checks declare only catalogue bugs."""
    for exercise in content.exercises.values():
        suite = content.suite(exercise)
        if suite is None:
            continue
        where = f"checks/{exercise.checks}.py"
        if suite.exercise != exercise.id:
            yield Problem(where, f"Suite('{suite.exercise}') is used by exercise '{exercise.id}'")
        for check in suite.checks:
            for bug_id in check.catches:
                if content.bugs and bug_id not in content.bugs:
                    yield Problem(where, f"check '{check.id}' catches '{bug_id}', which is not in prompts/bugs.toml")


@validator
def suites_are_well_formed(content: Content) -> Iterable[Problem]:
    """Every check has a title and points, runs `after` earlier checks only, and each suite has a
    public check (the examples `attn-kit check --public` runs)."""
    for exercise in content.exercises.values():
        suite = content.suite(exercise)
        if suite is None:
            continue
        where = f"checks/{exercise.checks}.py"
        ids = [c.id for c in suite.checks]
        if not any(c.public for c in suite.checks):
            yield Problem(where, "no check is public=True: mark the statement's worked example as one")
        for n, check in enumerate(suite.checks):
            if not check.title.strip() or check.points <= 0:
                yield Problem(where, f"check '{check.id}' needs a docstring title and points > 0")
            for before in check.after:
                if before not in ids[:n]:
                    yield Problem(where, f"check '{check.id}' runs after '{before}', which is not an earlier check")


@validator
def every_bug_is_caught_by_a_declared_check(content: Content) -> Iterable[Problem]:
    """Each bug with a bug file is declared in catches= by a check of that exercise's suite, and
    each catalogue bug by some check."""
    declared: set[str] = set()
    complete = len(content.exercises) == len(list((content.prompts / "exercises").glob("*.toml")))
    for exercise in content.exercises.values():
        suite = content.suite(exercise)
        if suite is None:
            complete = False
            continue
        caught = {b for c in suite.checks for b in c.catches}
        declared |= caught
        for bug_id in sorted({bug_id_of(p) for p in content.bug_files(exercise.id)} - caught):
            yield Problem(
                f"checks/{exercise.checks}.py",
                f"no check declares catches=('{bug_id}', ...), though solutions/{exercise.id}/bugs/ implements it",
            )
    if complete:
        for bug_id in content.bugs:
            if bug_id not in declared:
                yield Problem("prompts/bugs.toml", f"no check of any exercise declares that it catches '{bug_id}'")


@validator
def every_exercise_has_a_bench_workload(content: Content) -> Iterable[Problem]:
    """`attn-kit bench` can measure every exercise: its TOML has a [bench] table naming one of its
    functions, and its suite registers an input builder (@SUITE.for_bench) taking the table's
    size and dimensions."""
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        spec = exercise.bench
        if spec is None:
            yield Problem(where, "has no bench workload: add a [bench] table (see an existing exercise's, and docs/adding-an-exercise.md)")
            continue
        if spec.function not in exercise.function_names:
            yield Problem(where, f"[bench] function = '{spec.function}' is not one of its [[functions]]")
        suite = content.suite(exercise)
        if suite is None:
            continue
        if suite.bench_inputs is None:
            yield Problem(
                f"checks/{exercise.checks}.py", "registers no bench input builder: add `@SUITE.for_bench def bench_inputs(rng, T, ...)`"
            )
            continue
        try:
            inspect.signature(suite.bench_inputs).bind(None, **{spec.size: 1}, **spec.dimensions)
        except TypeError as exc:
            yield Problem(
                f"checks/{exercise.checks}.py",
                f"bench_inputs does not take the [bench] table's {spec.size} and dims of {exercise.id} ({exc})",
            )


def _declared_suites(checks: Path) -> dict[str, str]:
    """{module file name: exercise id} of every `SUITE = Suite("<id>")` under checks/, read
    without importing (a module may need torch)."""
    found = {}
    for path in sorted(checks.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "SUITE" for t in node.targets)
                and isinstance(node.value, ast.Call)
                and node.value.args
                and isinstance(node.value.args[0], ast.Constant)
            ):
                found[path.name] = str(node.value.args[0].value)
    return found


@validator
def every_suite_belongs_to_an_exercise(content: Content) -> Iterable[Problem]:
    """Every exercise's `checks` module exists and defines a SUITE, and every SUITE under checks/
    is for an exercise that has a TOML file."""
    declared = _declared_suites(content.checks)
    for exercise in content.exercises.values():
        name = f"{exercise.checks}.py"
        if name not in declared:
            missing = "does not exist" if not (content.checks / name).is_file() else "defines no SUITE = Suite(...)"
            yield Problem(content.relative(exercise.path), f"checks = '{exercise.checks}': checks/{name} {missing}")
    toml_stems = {p.stem for p in (content.prompts / "exercises").glob("*.toml")}
    for name, exercise_id in declared.items():
        if exercise_id not in toml_stems:
            yield Problem(f"checks/{name}", f"Suite('{exercise_id}') is for no exercise: there is no prompts/exercises/{exercise_id}.toml")


@validator
def families_fit_their_bug_files(content: Content) -> Iterable[Problem]:
    """Every [[family]] entry (prompts/families.toml and the exercises' own files) still edits text
    its bug file or reference holds: an edited reference or bug file must take its family entries
    along."""
    path = content.prompts / compose.FAMILIES
    entries = [(path, entry) for entry in compose.read_families(path)]
    for own in catalog.own_catalogues(content.prompts, lenient=True):  # toml_files_load reports the rest
        entries += [(own.path, entry) for entry in own.families]
    for exercise in content.exercises.values():
        textbook = {form.path.stem: form for form in compose.forms(exercise.id)}
        for where, entry in entries:
            if entry.get("exercise") != exercise.id or entry.get("form") not in textbook:
                continue
            try:
                compose.family_forms_of(entry, textbook[entry["form"]])
            except FamilyError as exc:
                yield Problem(content.relative(where), str(exc))


# --- files ----------------------------------------------------------------------------------------


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name not in IGNORED) if folder.is_dir() else []


@validator
def no_unexpected_prompt_files(content: Content) -> Iterable[Problem]:
    """prompts/ holds bugs.toml, coverage.toml, families.toml, concepts.toml, properties.toml,
    exercises/<id>.toml and catalogue/<id>.toml (for an exercise <id>) only: a stray file is a typo
    or a leftover."""
    expected = ("__init__.py", "bugs.toml", "coverage.toml", "families.toml", CONCEPTS_FILE, PROPERTIES_FILE)
    for path in _entries(content.prompts):
        if path.name not in expected + ("exercises", catalog.OWN_DIR):
            yield Problem(
                content.relative(path), f"unexpected in prompts/ (expected {', '.join(expected)}, exercises/, {catalog.OWN_DIR}/)"
            )
    for path in _entries(content.prompts / "exercises"):
        if path.suffix != ".toml":
            yield Problem(content.relative(path), "unexpected in prompts/exercises/ (only <exercise>.toml)")
    toml_stems = {p.stem for p in (content.prompts / "exercises").glob("*.toml")}
    for path in _entries(content.prompts / catalog.OWN_DIR):
        if path.suffix != ".toml" or path.stem not in toml_stems:
            yield Problem(
                content.relative(path),
                f"unexpected in prompts/{catalog.OWN_DIR}/ (only <exercise>.toml, named after an exercise of prompts/exercises/)",
            )


def _unexpected_in_exercise_folder(content: Content, folder: Path) -> Iterable[Problem]:
    for inner in _entries(folder):
        if inner.name == "bugs" and inner.is_dir():
            for bug in _entries(inner):
                if bug.suffix != ".py":
                    yield Problem(content.relative(bug), "unexpected in bugs/ (only <bug-id>[@<form>].py)")
        elif not (inner.is_file() and (re.fullmatch(r"reference_\w+\.py", inner.name) or inner.suffix == ".md")):
            yield Problem(content.relative(inner), "unexpected (expected reference_*.py, *.md and bugs/)")


@validator
def no_unexpected_solution_files(content: Content) -> Iterable[Problem]:
    """solutions/ holds one folder per exercise (references, *.md, bugs/*.py) and nothing else."""
    toml_stems = {p.stem for p in (content.prompts / "exercises").glob("*.toml")}
    for path in _entries(content.solutions):
        if path.name == "__init__.py":
            continue
        if not path.is_dir() or path.name not in toml_stems:
            yield Problem(content.relative(path), "unexpected in solutions/ (one folder per exercise id)")
        else:
            yield from _unexpected_in_exercise_folder(content, path)
    for exercise_id in sorted(content.exercises):
        if not (content.solutions / exercise_id).is_dir():
            yield Problem(f"solutions/{exercise_id}", "missing: every exercise has a solutions folder")


# --- the README's tables of exercises and properties ----------------------------------------------

PROPERTIES_FILE = "properties.toml"  # prompts/properties.toml: the rows of the properties tables


def _one_line_cell(text: str) -> str:
    """Why `text` cannot be a README table cell, or ''."""
    if "\n" in text or "|" in text:
        return "must be one line without '|' (it is a README table cell)"
    return ""


@validator
def exercises_fill_their_readme_cells(content: Content) -> Iterable[Problem]:
    """Every exercise says what it builds (`builds`) and states each headline property of
    prompts/properties.toml in its [properties] table: checks of its suite (with an optional note),
    or `na` and why it cannot break it. `dev update` writes the README's tables from these."""
    properties = {p.id for p in content.properties}
    for exercise in content.exercises.values():
        where = content.relative(exercise.path)
        if not exercise.builds.strip():
            yield Problem(where, "'builds' is empty: say what the candidate builds (the README's Exercises table)")
        for key in ("builds", "proves"):
            why = _one_line_cell(getattr(exercise, key))
            if why:
                yield Problem(where, f"'{key}' {why}")
        cells = {c.property: c for c in exercise.properties}
        for missing in sorted(properties - set(cells)):
            yield Problem(where, f"[properties] has no '{missing}': name the checks that state it, or na = \"why it cannot break here\"")
        for cell in cells.values():
            yield from (
                Problem(where, f"[properties] '{cell.property}' {text}")
                for text in _property_cell_problems(content, exercise, cell, properties)
            )


def _property_cell_problems(content: Content, exercise: catalog.Exercise, cell: catalog.PropertyCell, properties: set[str]) -> list[str]:
    problems = []
    if properties and cell.property not in properties:
        problems.append(f"is not a property of prompts/{PROPERTIES_FILE}")
    if bool(cell.checks) == bool(cell.na) or (cell.na and cell.note):
        problems.append("needs checks = [...] (and maybe a note) or na, not both")
    for key in ("note", "na"):
        why = _one_line_cell(getattr(cell, key))
        if why:
            problems.append(f"{key} {why}")
    suite = content.suite(exercise) if cell.checks else None
    unknown = sorted(set(cell.checks) - {c.id for c in suite.checks}) if suite is not None else []
    if unknown:
        problems.append(f"names no check of its suite: {', '.join(unknown)}")
    return problems


def readme_regions(content: Content) -> dict[str, str] | None:
    """What `dev update` writes into the README's marked regions; None while some exercise or
    prompts/properties.toml does not load (toml_files_load says which)."""
    if len(content.exercises) != len(list((content.prompts / "exercises").glob("*.toml"))):
        return None
    try:
        properties = catalog.load_properties(content.prompts / PROPERTIES_FILE)
    except (CatalogError, OSError):
        return None
    return readme_tables.regions(content.exercises.values(), properties)


@validator
def readme_tables_are_up_to_date(content: Content) -> Iterable[Problem]:
    """In a source checkout, the README's generated tables are what `attn-kit dev update` writes
    (an installed copy has no README beside the package: nothing to check)."""
    path = content.readme_file
    regions = readme_regions(content) if path is not None else None
    if path is None or regions is None:
        return
    for what in readme_tables.stale(path.read_text(encoding="utf-8"), regions):
        yield Problem("README.md", f"out of date ({what}): run attn-kit dev update")
    doc, text = content.catalogue_doc, catalogue_text(content)
    if doc is not None and text is not None and (not doc.is_file() or doc.read_text(encoding="utf-8") != text):
        yield Problem(readme_tables.CATALOGUE_DOC, "out of date (the known bugs of each exercise): run attn-kit dev update")


def catalogue_text(content: Content) -> str | None:
    """docs/catalogue.md as `dev update` writes it; None while some content does not load."""
    if len(content.exercises) != len(list((content.prompts / "exercises").glob("*.toml"))) or not content.bugs:
        return None
    ordered = sorted(content.exercises.values(), key=lambda e: (e.order, e.id))
    rows = {}
    for exercise in ordered:
        present = {bug_id_of(p) for p in content.bug_files(exercise.id)}
        rows[exercise.id] = [(b.id, " ".join(b.title.split())) for b in content.bugs.values() if b.id in present]
    return readme_tables.catalogue_doc(ordered, rows, len(content.bugs))


def update_readme(content: Content | None = None) -> list[str]:
    """Rewrite the README's generated regions; returns the names of those that changed.

    Raises UsageError when there is no README beside the package (an installed copy) or some
    content does not load, and when the README lacks a region (where to put its markers)."""
    content = content or Content.installed()
    path = content.readme_file
    if path is None:
        raise UsageError(
            f"no README.md beside {content.prompts}: `attn-kit dev update` rewrites a source "
            "checkout's README, and this is an installed copy."
        )
    regions = readme_regions(content)
    if regions is None:
        problems = "; ".join(map(str, toml_files_load(content))) or f"prompts/{PROPERTIES_FILE} does not load"
        raise UsageError(f"the content does not load, so the README's tables cannot be written: {problems}")
    text = path.read_text(encoding="utf-8")
    missing = [what for what in readme_tables.stale(text, regions) if what.startswith("no ")]
    if missing:
        raise UsageError(f"README.md has {missing[0]}: put the two marker lines where the table belongs.")
    new = readme_tables.update(text, regions)
    stale = " ".join(readme_tables.stale(text, regions))
    changed = [name for name in regions if f"'{name}'" in stale]
    if new != text:
        safefile.write_text(path, new)
    return changed


def update_catalogue_doc(content: Content | None = None) -> bool:
    """Rewrite docs/catalogue.md (a source checkout's; update_readme refuses an installed copy
    first); returns whether it changed."""
    content = content or Content.installed()
    doc, text = content.catalogue_doc, catalogue_text(content)
    if doc is None or text is None or (doc.is_file() and doc.read_text(encoding="utf-8") == text):
        return False
    safefile.write_text(doc, text)
    return True
