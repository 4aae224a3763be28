"""The check pipeline: load -> run in the sandbox -> compare -> diagnose, returning a Report.

Rendering is not done here; cli/app.py hands the Report to render/check.py or prints its JSON.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable

from attn_kit.base.errors import CallFailed, CheckFailed, CheckSkipped, DependencyMissing, LoadError
from attn_kit.base.records import CallStatus, Outcome
from attn_kit.base.recordtype import record
from attn_kit.grading import relax
from attn_kit.load import catalog, preflight
from attn_kit.load.catalog import MUTATION_BUG
from attn_kit.report.results import FAILED, Call, CheckResult, CheckStatus, Diagnosis, Report
from attn_kit.sandbox import zygote as sandbox_zygote
from attn_kit.sandbox.session import DEFAULT_MEMORY, DEFAULT_TIMEOUT, Sandbox

if TYPE_CHECKING:  # registry (and NumPy) load in grade(), once the zygote is starting beside them
    from attn_kit.compare.registry import Check, Relaxation, Suite

BLOCKED = "skipped because"  # how a check skipped for a failed prerequisite starts its message
STOPPED = (CallStatus.TIMEOUT, CallStatus.CRASHED, CallStatus.MEMORY)  # calls the kit had to stop


@record
class Options:
    exercise: str | None = None
    seed: int | None = None
    public_only: bool = False
    pure: bool = False
    timeout: float = DEFAULT_TIMEOUT
    memory: int | None = DEFAULT_MEMORY
    reads: tuple[str, ...] | None = None  # what the code may read (default: its file's folder)
    confine: str = "try"  # "require": nothing runs where the code cannot be confined


def require(exercise: catalog.Exercise) -> None:
    """Raise DependencyMissing when the exercise needs an optional package that is not installed."""
    if exercise.needs and importlib.util.find_spec(exercise.needs) is None:
        raise DependencyMissing(
            f"{exercise.id} needs {exercise.needs}, which is not installed here. " + DependencyMissing.how_to_install(exercise.needs)
        )


def preload_for(imported: Collection[str], exercise: catalog.Exercise) -> tuple[str, ...]:
    """The modules the zygote imports before it forks the file's workers: the exercise's
    dependency, and torch when the file imports it (`imported`: the top-level names it imports),
    on a NumPy exercise too. Imported once there, torch is not imported again by each worker (a
    second or more, inside the first call's timeout), and --locate's edited copies and a watch
    re-run use the same warm zygote."""
    return tuple(dict.fromkeys([*([exercise.needs] if exercise.needs else []), *(m for m in ("torch",) if m in imported)]))


def suite_for(exercise: catalog.Exercise) -> Suite:
    require(exercise)
    return importlib.import_module(f"attn_kit.checks.{exercise.checks}").SUITE


def hint_for(exercise: catalog.Exercise, check: Check) -> int | None:
    for number, hint in enumerate(exercise.hints, start=1):
        if check.id in hint.checks:
            return number
    return check.hint


def hint_for_bug(exercise: catalog.Exercise, checks: Sequence[Check], bug_id: str) -> int | None:
    """The one hint every check diagnosed as `bug_id` points at, so one mistake never scatters
    over several topics: among the hints on the bug's concept, the one that lists the check
    catching the bug most narrowly (fewest declared catches, then suite order); else the first
    hint on that concept; else the hint of that narrowest check whatever its concept. An exercise
    whose topics share a concept thus still sends each bug to the topic about its own check."""
    bug = catalog.bugs().get(bug_id)
    narrow = [checks[i] for _, i in sorted((len(c.catches), i) for i, c in enumerate(checks) if bug_id in c.catches)]
    on_concept = [n for n, hint in enumerate(exercise.hints, start=1) if bug and hint.concept == bug.concept]
    listed = (n for check in narrow for n in on_concept if check.id in exercise.hints[n - 1].checks)
    level = next(listed, None) or (on_concept[0] if on_concept else None)
    if level is not None:
        return level
    return next((h for check in narrow if (h := hint_for(exercise, check)) is not None), None)


def run_check(
    check: Check,
    sandbox: Sandbox,
    oracle: ModuleType,
    seed: int,
    statuses: dict[str, CheckStatus],
    exercise: catalog.Exercise,
    source: preflight.SourceFile | None = None,
    run_blocked: bool = True,
    relaxations: Sequence[Relaxation] = (),
    relaxed_last: list[Relaxation] | None = None,
) -> CheckResult:
    """Run one check. When its call raised, it is judged again at the first of `relaxations` (the
    suite's simpler shapes) the code runs at, for no points (grading/relax.py); `relaxed_last`
    holds the one that worked for the previous check."""
    started = time.perf_counter()

    def fresh() -> CheckResult:
        return CheckResult(
            check.id,
            check.title,
            CheckStatus.PASS,
            0,
            check.points,
            public=check.public,
            catches=check.catches,
            hint=hint_for(exercise, check),
        )

    result = fresh()
    blocker = next((a for a in check.after if statuses.get(a, CheckStatus.PASS) != CheckStatus.PASS), None)
    if not (blocker and not run_blocked):
        result = _run(check, result, sandbox, oracle, seed, source)
        result = relax.judged_again(
            check,
            result,
            relaxations,
            lambda r: _run(check, fresh(), sandbox, oracle, seed, source, r),
            relaxed_last if relaxed_last is not None else [],
        )
    judged = result.supported_shape and result.status == CheckStatus.FAIL  # its own failure at a supported shape
    if blocker and (result.status != CheckStatus.PASS or not run_blocked) and not judged:
        # A failed prerequisite (an output-shape check) does not cost the checks whose cases the
        # candidate's shapes still allow: they run and keep their points. One that does not pass
        # shows as skipped, so one root cause stays one red line.
        result = CheckResult(
            check.id,
            check.title,
            CheckStatus.SKIP,
            0,
            check.points,
            public=check.public,
            catches=check.catches,
            hint=result.hint,
            message=f"{BLOCKED} `{blocker}` did not pass; fix that first"
            + (f". {relax.passes_at(result.supported_shape)}" if result.supported_shape else ""),
            supported_shape=result.supported_shape,
        )
    result.seconds = time.perf_counter() - started
    return result


def _run(
    check: Check,
    result: CheckResult,
    sandbox: Sandbox,
    oracle: ModuleType,
    seed: int,
    source: preflight.SourceFile | None,
    relaxation: Relaxation | None = None,
) -> CheckResult:
    """Run one check's function (at `relaxation`'s simpler shape, if given) and fill in `result` from what it did."""
    from attn_kit.compare.registry import CheckContext
    from attn_kit.diagnosis import diagnose

    ctx = CheckContext(sandbox, oracle, seed, check, source=source, float32_reference=diagnose.float32_reference, relaxation=relaxation)
    try:
        check.func(ctx)
        result.points = check.points
        if unimplemented(ctx.calls):  # e.g. inputs-left-unmodified on the untouched starter
            result.status, result.points = CheckStatus.ERROR, 0
            names = ", ".join(dict.fromkeys(f"`{c.fn}`" for c in ctx.calls))
            result.message = f"{names} is not implemented yet (every call raised NotImplementedError), so this check earns nothing"
    except CheckFailed as exc:
        result.status, result.message, result.mismatch = CheckStatus.FAIL, str(exc), exc.mismatch
    except CallFailed as exc:
        result.status, result.message = CheckStatus.ERROR, str(exc)
        error = exc.call.outcome.error
        if error and error.traceback and error.type != "NotImplementedError":
            result.notes += (error.traceback.rstrip(),)
    except CheckSkipped as exc:
        result.status, result.message, result.points = CheckStatus.SKIP, str(exc), 0
    result.calls = ctx.calls
    result.float32 = ctx.float32
    result.failing_call = ctx.failing_call
    result.case = ctx.case
    result.notes += tuple(ctx.notes)
    result.output = "".join(c.outcome.output for c in ctx.calls)
    return result


def unimplemented(calls: Sequence[Call]) -> bool:
    """The check called the candidate's code and every call raised NotImplementedError."""
    return bool(calls) and all(c.outcome.error is not None and c.outcome.error.type == "NotImplementedError" for c in calls)


def looks_like(exercise: catalog.Exercise, functions: Collection[str]) -> catalog.Exercise | None:
    """Another exercise whose main function the file defines, when it lacks this one's."""
    if exercise.main in functions:
        return None
    return next((e for e in catalog.exercises().values() if e.id != exercise.id and e.main in functions), None)


def not_checked(results: list[CheckResult]) -> list[str]:
    """Report notes for checks that did not apply (CheckSkipped), one per reason, naming them."""
    reasons: dict[str, list[str]] = {}
    for r in results:
        if r.status == CheckStatus.SKIP and not r.message.startswith(BLOCKED):
            reasons.setdefault(r.message, []).append(r.id)
    return [f"{', '.join(ids)} not checked (no points): {reason}" for reason, ids in reasons.items()]


def pure_check(source: preflight.SourceFile, seen: tuple[str, ...] = ()) -> CheckResult:
    """--pure: the file imports only the standard library (its import statements, plus what its
    code imported at run time through __import__, importlib or a hidden sys.modules entry)."""
    in_source = source.non_stdlib_imports()
    listed = {name for name, _ in in_source}
    outside: list[tuple[str, int | None]] = [*in_source, *((name, None) for name in seen if name not in listed)]
    result = CheckResult("standard-library-only", "The file imports only Python's standard library", CheckStatus.PASS, 1, 1)
    if outside:
        listing = ", ".join(f"{name} (line {line})" if line else f"{name} (imported while running)" for name, line in outside)
        result.status, result.points = CheckStatus.FAIL, 0
        result.message = (
            f"--pure forbids imports outside the standard library; this file imports "
            f"{listing}. On-device screens often allow no framework: use lists and math."
        )
    return result


def mutation_found(results: Sequence[CheckResult], mutable: Sequence[str] = (), late: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Every call's written arguments, found by the sandbox from data: the written parts, as
    `fn` wrote `part` (in check-id) lines; `mutable` names arguments the exercise lets the
    candidate update (a decode step's cache). `late` (Sandbox.finish): (fn,
    part) written after their call had returned, found only when the worker's calls were
    compared again as a whole (a write no later call's comparison saw)."""
    where: dict[str, list[str]] = {}  # "`fn` wrote into part" -> the checks it happened in
    for r in results:
        for call in r.calls:
            for part in call.outcome.mutated:
                if part.split("[")[0].split(" ")[0] in mutable:
                    continue
                verb = "added" if part.endswith(" (added)") else "removed" if part.endswith(" (removed)") else "wrote into"
                line = f"`{call.fn}` {verb} {part.rsplit(' (', 1)[0] if verb != 'wrote into' else part}"
                checks = where.setdefault(line, [])
                if r.id not in checks:
                    checks.append(r.id)
    found = [
        f"{line} (in {', '.join(checks[:2])}{f' and {len(checks) - 2} more' if len(checks) > 2 else ''})" for line, checks in where.items()
    ]
    found.extend(
        dict.fromkeys(
            f"`{fn}` wrote into {part} (written after it returned; seen when the kit compared every call's arguments again, at the end)"
            for fn, part in late
            if part.split("[")[0].split(" ")[0] not in mutable
        )
    )
    return found


def _mutation_verdict(result: CheckResult, found: list[str]) -> None:
    """The check that catches mutates-input fails when any call of any check wrote into an
    argument (even in a check about something else, such as a call that omits optional entries)."""
    if found and result.status == CheckStatus.PASS:
        result.status, result.points = CheckStatus.FAIL, 0
        result.message = (
            "an argument was changed in place: "
            + "; ".join(found[:3])
            + (f"; and {len(found) - 3} more" if len(found) > 3 else "")
            + ". Work on copies or build new values; never write into what you were given."
        )


def grade(path: str | Path, options: Options = Options(), progress: Callable[[str], None] | None = None) -> Report:
    """Run the exercise's graded suite on a candidate file. Raises KitError if it cannot be graded.
    `progress`, if given, is told in words what is being done (a check starting, the diagnosis)."""
    started = time.perf_counter()
    source = preflight.read_source(path)
    exercise = preflight.detect_exercise(source, options.exercise)
    require(exercise)
    seed = options.seed if options.seed is not None else _new_seed()
    notes: list[str] = []
    preload = preload_for({name for name, _ in source.imports()}, exercise)
    if preload != ((exercise.needs,) if exercise.needs else ()):
        sandbox_zygote.expected_values_loaded()  # torch beyond the exercise's needs: a fresh zygote imports it, never this process
    # The zygote forks here, before the checks, the oracle or any bug file exists in this process.
    with Sandbox(
        str(source.path),
        options.timeout,
        options.memory,
        pure=options.pure,
        preload=preload,
        reads=options.reads,
        confine=options.confine,
    ) as sandbox:
        # the zygote is setting up its first worker now; meanwhile this process loads the rest
        from attn_kit.diagnosis import diagnose

        sandbox_zygote.expected_values_loaded()  # also done by whatever first loads a kit solution (diagnose, compose)
        suite = suite_for(exercise)
        oracle = diagnose.oracle_for(exercise)
        diagnose.preload(exercise)  # the bug files, read before the first worker starts
        info = sandbox.start()
        if info.note:
            notes.append(info.note)
        other = looks_like(exercise, info.functions)
        if other is not None:
            raise _another_exercise(source, exercise, other, options)
        preflight.check_functions(exercise, info.functions, source.path)
        results, late = _run_checks(suite, sandbox, oracle, seed, exercise, source, options, progress)
        answers = _probe(exercise, sandbox, oracle, source, results)
        notes.extend(not_checked(results) + relax.notes(results, suite.relaxations))
        if sandbox.restarts:
            notes.append(f"the worker process was restarted {sandbox.restarts} time(s) after a hang or crash")
        if options.pure:
            results.insert(0, pure_check(source, tuple(sandbox.pure_seen)))
    written = mutation_found(results, getattr(suite, "mutable", ()), late)
    float32 = max((r.float32 for r in results), default=0.0)
    if float32:
        notes.append(
            f"your code computes in float32: differences from the float64 reference of up to "
            f"{float32:.2g} are within float32 rounding and were accepted (compute in float64 to "
            "match the reference exactly)"
        )
    if progress is not None and any(r.status in FAILED for r in results):
        progress(f"{source.path.name}: matching the failures against the known bugs")
    finding = diagnose.analyse(exercise, results)
    if answers:
        from attn_kit.diagnosis import probes

        probes.meet(finding, answers, results)
    diagnoses = [_in_exercise(exercise, d) for d in finding.diagnoses]
    if written and not any(d.bug == MUTATION_BUG for d in diagnoses):
        diagnoses.append(_in_exercise(exercise, _mutation_diagnosis(written, results)))
        finding.check_bug.update({d: MUTATION_BUG for d in diagnoses[-1].checks if d not in finding.check_bug})
    # the report is built once, from settled results: each failed check with the bug the
    # diagnosis attributes it to, and the hint about that bug
    attributed = [_attributed(r, finding.check_bug, exercise, suite.checks) for r in results]
    return Report(
        exercise.id,
        str(source.path),
        seed,
        attributed,
        public_only=options.public_only,
        notes=notes,
        diagnosis=diagnoses,
        near_misses=finding.near_misses,
        wrong_rows=finding.wrong_total,
        unexplained=list(finding.unexplained),
        seconds=time.perf_counter() - started,
    )


def _new_seed() -> int:
    import random  # only here: the CLI chooses the seed itself

    return random.SystemRandom().randrange(1, 100_000)


def _probe(
    exercise: catalog.Exercise, sandbox: Sandbox, oracle: ModuleType, source: preflight.SourceFile, results: list[CheckResult]
) -> list:
    """The exercise's probes' answers (checks/probes_<suite>.py's PROBES), asked when a check
    failed and no call hung or crashed (a probe must not wait on a stuck worker)."""
    if not any(r.status in FAILED for r in results) or any(c.outcome.status in STOPPED for r in results for c in r.calls):
        return []
    name = f"attn_kit.checks.probes_{exercise.checks}"
    if importlib.util.find_spec(name) is None:
        return []
    from attn_kit.diagnosis import probes

    table = importlib.import_module(name).PROBES

    def run(fn: str, args: tuple, kwargs: dict) -> Outcome:
        return sandbox.call(fn, args, kwargs, timeout=probes.PROBE_TIMEOUT, echo=False)

    return probes.ask_all(table, probes.Asker(run, oracle, source))


def _attributed(result: CheckResult, check_bug: dict[str, str], exercise: catalog.Exercise, checks: Sequence[Check]) -> CheckResult:
    """The result with the bug its failure is attributed to, and the hint that points at that bug."""
    bug = check_bug.get(result.id) if result.status in FAILED else None
    hint = (hint_for_bug(exercise, checks, bug) or result.hint) if bug else result.hint
    return dataclasses.replace(result, bug=bug, hint=hint)


def _another_exercise(source: preflight.SourceFile, exercise: catalog.Exercise, other: catalog.Exercise, options: Options) -> LoadError:
    """The error for a file that defines another exercise's main function instead of this one's."""
    import difflib  # only here: a check that starts imports nothing it does not use

    named = f"--exercise {options.exercise}" if options.exercise else f"its header `# attn-kit: {exercise.id}`"
    if difflib.SequenceMatcher(None, other.main, exercise.main).ratio() >= 0.8:  # one name misspelt as the other
        return LoadError(
            f"{source.path} does not define `{exercise.main}`, which {named} asks for. Did you mean "
            f"`{exercise.main}` where it says `{other.main}`? (`{other.main}` is {other.id}'s main function: "
            f"if the file is for {other.id}, `attn-kit check {source.path} --exercise {other.id}`.)"
        )
    return LoadError(
        f"{source.path} looks like a {other.id} solution (it defines `{other.main}`), but {named} "
        f"asks for {exercise.id}, whose main function is `{exercise.main}`. To grade it as {other.id}: "
        f"`attn-kit check {source.path} --exercise {other.id}`, or make its first line "
        f"`# attn-kit: {other.id}`."
    )


def _run_checks(
    suite: Suite,
    sandbox: Sandbox,
    oracle: ModuleType,
    seed: int,
    exercise: catalog.Exercise,
    source: preflight.SourceFile,
    options: Options,
    progress: Callable[[str], None] | None,
) -> tuple[list[CheckResult], list[tuple[str, str]]]:
    """Run the suite's checks (the public ones with --public-only) in order, each told which of
    its prerequisites failed; once a call hung or crashed, checks behind a failed one are skipped
    unrun. Returns the results in suite order and the late writes (Sandbox.finish): (fn, part)
    written after their call had returned, found by comparing every call's arguments at the end."""
    results: list[CheckResult] = []
    statuses: dict[str, CheckStatus] = {}
    planned = [c for c in suite.checks if c.public or not options.public_only]
    # The check that catches mutates-input runs last and judges every call of every check: its
    # verdict is settled when it runs, from all the evidence, never changed afterwards.
    last = [c for c in planned if MUTATION_BUG in c.catches][:1]
    hung = False
    late: list[tuple[str, str]] = []
    relaxed_last: list[Relaxation] = []  # the simpler shape the previous check ran at (grading/relax.py)
    for check in [c for c in planned if c not in last] + last:
        if progress is not None:
            progress(f"{source.path.name}: check {len(results) + 1}/{len(planned)} {check.id}")
        result = run_check(
            check, sandbox, oracle, seed, statuses, exercise, source, not hung, suite.relaxations if not hung else (), relaxed_last
        )
        if check in last:  # no call comes after it: the end-of-run comparison is made now, once
            late = sandbox.finish()
            _mutation_verdict(result, mutation_found(results + [result], getattr(suite, "mutable", ()), late))
        hung = hung or any(c.outcome.status in STOPPED for c in result.calls)
        statuses[check.id] = result.status
        results.append(result)
    if not last:
        late = sandbox.finish()
    order = {c.id: i for i, c in enumerate(planned)}
    return sorted(results, key=lambda r: order[r.id]), late  # shown in the suite's order


def _in_exercise(exercise: catalog.Exercise, diagnosis: Diagnosis) -> Diagnosis:
    """The diagnosis with the exercise's own wording of the bug ([[bug_texts]]): a fix that holds
    under the exercise's conventions, not only the shared catalogue's."""
    bug = exercise.bug(diagnosis.bug)
    if bug is None:
        return diagnosis
    return dataclasses.replace(diagnosis, explanation=bug.symptom, fix=bug.fix, fix_short=bug.fix_short)


def _mutation_diagnosis(written: list[str], results: list[CheckResult]) -> Diagnosis:
    """mutates-input, named from the evidence itself: the arguments the calls wrote into."""
    bug = catalog.bugs().get(MUTATION_BUG)
    checks = tuple(r.id for r in results if r.status in FAILED and (MUTATION_BUG in r.catches or any(c.outcome.mutated for c in r.calls)))
    evidence = "; ".join(written[:3]) + (f"; and {len(written) - 3} more" if len(written) > 3 else "")
    return Diagnosis(MUTATION_BUG, bug.title if bug else MUTATION_BUG, evidence, bug.symptom if bug else "", bug.fix if bug else "", checks)
