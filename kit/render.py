"""Everything the user sees in the terminal. The only module that imports rich.

Styles have names that say what they mean (check.fail, not bold red) and live in one Theme.
Colour is off under NO_COLOR and when output is piped (rich's own rules).
"""

from __future__ import annotations

import functools

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.theme import Theme

from .report import CheckResult, Report

THEME = Theme({
    "check.pass": "green",
    "check.fail": "bold red",
    "check.error": "bold magenta",
    "check.skip": "dim",
    "score.good": "bold green",
    "score.bad": "bold red",
    "label": "bold",
    "muted": "dim",
    "expected": "green",
    "actual": "red",
    "bug.id": "bold yellow",
    "hint": "cyan",
    "error": "bold red",
    "warning": "yellow",
    "command": "bold cyan",
})

MARK = {"pass": "✓", "fail": "✗", "error": "!", "skip": "–"}


@functools.cache
def console() -> Console:
    return Console(theme=THEME, highlight=False)


@functools.cache
def error_console() -> Console:
    return Console(theme=THEME, highlight=False, stderr=True)


def error(message: str) -> None:
    # soft_wrap: a source line with its caret must not be re-wrapped by rich
    error_console().print(Text("Error: ", style="error") + Text(message), soft_wrap=True)


def warning(message: str) -> None:
    error_console().print(Text("Warning: ", style="warning") + Text(message))


def info(message: str) -> None:
    console().print(message)


# --- exercises ------------------------------------------------------------------------------

def exercise_list(exercises, out: Console | None = None) -> None:
    out = out or console()
    table = Table(show_header=True, header_style="label", box=None, pad_edge=False)
    table.add_column("exercise", style="command", no_wrap=True)
    table.add_column("what you build")
    table.add_column("needs", style="muted")
    for e in exercises:
        table.add_row(e.id, e.summary, e.needs or "")
    out.print(table)
    out.print(Text("Start one with: ", style="muted") + Text("attn-kit start EXERCISE FILE", style="command"))


def statement(exercise, out: Console | None = None) -> None:
    (out or console()).print(Markdown(exercise.statement))


def started(exercise, path, out: Console | None = None) -> None:
    out = out or console()
    statement(exercise, out)
    out.print()
    out.print(Text("Wrote the starter file ", style="muted") + Text(str(path), style="label")
              + Text(". Edit it, then run: ", style="muted") + Text(f"attn-kit check {path}", style="command"))


# --- check reports ----------------------------------------------------------------------------

def _row(values, offset: int) -> str:
    text = ", ".join(f"{v:.6g}" for v in values)
    return f"[{'…, ' if offset else ''}{text}]"


def _clip(output: str, limit: int = 1500) -> str:
    """At most `limit` characters of captured output, keeping the worker's truncation notices."""
    if len(output) <= limit:
        return output
    notices = [line for line in output.splitlines() if line.startswith("… [output truncated")]
    return "\n".join([output[:limit], f"… [{len(output) - limit:,} more characters not shown here]", *notices[:1]])


def _failure(result: CheckResult, exercise_id: str) -> Group:
    parts = [Text(result.message)]
    m = result.mismatch
    if m is not None:
        start = f" (from index {m.row_offset})" if m.row_offset else ""
        parts.append(Text(f"worst row{start}:", style="muted"))
        parts.append(Text("  expected ", style="muted") + Text(_row(m.expected_row, m.row_offset), style="expected"))
        parts.append(Text("  yours    ", style="muted") + Text(_row(m.actual_row, m.row_offset), style="actual"))
        relative = "n/a (expected 0)" if m.max_rel != m.max_rel else f"{m.max_rel:.3g}"
        error = (f"max |Δ| = {m.max_abs:.3g}, max relative = {relative}" if not m.nan_count
                 else "max |Δ| undefined (NaN)")
        parts.append(Text(f"{error}, "
                          f"{m.wrong_count}/{m.total} entries off, NaN {m.nan_count}, inf {m.inf_count}",
                          style="muted"))
    case = {k: v for k, v in result.case.items()}
    if case:
        facts = ", ".join(f"{k}={v}" for k, v in case.items())
        parts.append(Text("case: ", style="muted") + Text(facts))
    for note in result.notes:
        parts.append(Text(note, style="muted"))
    if result.output.strip():
        parts.append(Text("your code printed:", style="muted"))
        parts.append(Text(_clip(result.output.rstrip())))
    if result.hint:
        parts.append(Text("hint: ", style="hint") + Text(f"attn-kit hint {exercise_id} --level {result.hint}",
                                                        style="command"))
    return Group(*parts)


def report(rep: Report, exercise=None, out: Console | None = None) -> None:
    out = out or console()
    title = Text("attn-kit check ", style="label") + Text(f"{rep.exercise} · {rep.path} · seed {rep.seed}",
                                                          style="muted")
    if rep.public_only:
        title += Text(" · public examples only", style="muted")
    out.print(title)
    table = Table(show_header=True, header_style="label", box=None, pad_edge=False, expand=False)
    table.add_column("", width=1)
    table.add_column("check", no_wrap=True)
    table.add_column("points", justify="right")
    for r in rep.results:
        style = f"check.{r.status}"
        table.add_row(Text(MARK[r.status], style=style), Text(r.id, style=style if r.status != "pass" else ""),
                      Text(f"{r.points}/{r.max_points}", style="muted"))
    out.print(table)
    for r in rep.results:          # measured figures of passing checks (peak memory, cache saving, ...)
        if r.status == "pass":
            for note in r.notes:
                out.print(Text(f"{r.id}: ", style="muted") + Text(note))
    for note in rep.notes:
        out.print(Text(f"note: {note}", style="warning"))
    failures = [r for r in rep.results if r.status in ("fail", "error")]
    shown_bugs: set[str] = set()
    for r in failures:
        if r.bug and r.bug in shown_bugs:
            # the same root cause as a failure shown in full above: one line is enough
            out.print(Text(f"{MARK[r.status]} {r.id}", style=f"check.{r.status}")
                      + Text("  same cause: ", style="muted") + Text(r.bug, style="bug.id"))
            continue
        head = Text(f"{MARK[r.status]} {r.id}", style=f"check.{r.status}") + Text(f" — {r.title}")
        out.print()
        if r.bug:
            head += Text("  matches ", style="muted") + Text(r.bug, style="bug.id")
            shown_bugs.add(r.bug)
        out.print(head)
        out.print(Padding(_failure(r, rep.exercise), (0, 0, 0, 2), expand=False))
    if failures:
        out.print()
        if rep.diagnosis:
            out.print(Text("Diagnosis", style="label"))
            for d in rep.diagnosis:
                out.print(Text("  ● ", style="bug.id") + Text("Your output matches ", style="")
                          + Text(d.bug, style="bug.id") + Text(f" — {d.title}."))
                out.print(Padding(Group(Text(d.explanation), Text("Fix: " + d.fix, style="hint"),
                                        Text(d.evidence, style="muted")), (0, 0, 0, 4), expand=False))
        else:
            out.print(Text("Diagnosis: ", style="label")
                      + Text("no known bug matches these failures; read the worst rows above."))
            for line in rep.near_misses:
                out.print(Padding(Text(line, style="muted"), (0, 0, 0, 2), expand=False))
    passed, total = rep.score
    got, most = rep.points
    out.print()
    if rep.passed:
        skipped = sum(r.status == "skip" for r in rep.results)
        verdict = (f"✓ All {total} checks passed" if not skipped
                   else f"✓ All {total - skipped} checks that ran passed ({skipped} not checked)")
        out.print(Text(verdict, style="score.good")
                  + Text(f" — {got}/{most} points." + (" (public examples only: run without --public for the "
                                                      "full graded suite)" if rep.public_only else "")))
        if exercise is not None and not rep.public_only:
            _followups(exercise, out)
    else:
        skipped = sum(r.status == "skip" for r in rep.results)
        tail = f", {skipped} skipped" if skipped else ""
        out.print(Text(f"Score: {passed}/{total} checks passed{tail} — {got}/{most} points.", style="score.bad")
                  + Text(f"  Rerun the same cases with --seed {rep.seed}.", style="muted"))


def _followups(exercise, out: Console) -> None:
    from . import catalog
    available = [f for f in exercise.followups if f.exercise in catalog.exercises()]
    if not available:
        return
    out.print(Text("Follow-ups an interviewer may ask next:", style="label"))
    for f in available:
        out.print(Text("  ") + Text(f"attn-kit start {f.exercise} {f.exercise.replace('-', '_')}.py",
                                    style="command") + Text(f"  {f.prompt}", style="muted"))


def repro_written(paths, out: Console | None = None) -> None:
    out = out or console()
    for path in paths:
        out.print(Text("repro: ", style="muted") + Text(f"python {path}", style="command"))


# --- grading the candidate's own tests (attn-kit test-tests, check --tests) -----------------------

def test_grade(grade, out: Console | None = None) -> None:
    """The verdict on a candidate's tests: wrong tests, a bug table, test ideas for missed bugs."""
    out = out or console()
    references = sum(r.bug is None for r in grade.runs)
    out.print(Text("attn-kit test-tests ", style="label") + Text(f"{grade.exercise} · {grade.path}", style="muted"))
    out.print(Text(f"{_count(len(grade.tests), 'test')} run against {references} reference and "
                   f"{_count(len(grade.runs) - references, 'known-bug implementation')} in {grade.seconds:.1f} s",
                   style="muted"))
    if grade.wrong:
        out.print(Text(f"✗ {_count(len(grade.wrong), 'wrong test')}: "
                       f"{'they fail' if len(grade.wrong) > 1 else 'it fails'} on correct code, so "
                       f"{'they catch' if len(grade.wrong) > 1 else 'it catches'} nothing", style="check.fail"))
        for w in grade.wrong:
            where = f" {w.where}" if w.where else ""
            verb = {"failed": "fails", "error": "errors", "timeout": "hangs"}.get(w.outcome, w.outcome)
            out.print(Text(f"  ✗ {w.name}", style="check.fail")
                      + Text(f"{where} — {verb} on {w.implementation}", style="muted"))
            body = [Text(w.message.rstrip())]
            if w.output.strip():
                body += [Text("it printed:", style="muted"), Text(w.output.rstrip()[:800])]
            out.print(Padding(Group(*body), (0, 0, 0, 6), expand=False))
    else:
        out.print(Text(f"✓ Every test passes on the correct implementations ({', '.join(grade.judged_on)}).",
                       style="check.pass"))
    for note in grade.notes:
        out.print(Text(f"note: {note}", style="warning"))
    out.print()
    table = Table(show_header=True, header_style="label", box=None, pad_edge=False, expand=False)
    table.add_column("", width=1)
    table.add_column("known bug", no_wrap=True)
    table.add_column("caught by")
    for bug in grade.bugs:
        style = "check.pass" if bug.caught else "check.fail"
        tests = ", ".join(bug.caught_by) if bug.caught else "—"
        cell = Text(tests, style="" if bug.caught else "muted")
        if bug.caught and bug.missed_forms:
            missed = ", ".join(f"`{f}`" if f else "the main form" for f in bug.missed_forms)
            cell += Text(f"  ({len(bug.forms) - len(bug.missed_forms)} of {len(bug.forms)} forms; missed: {missed})",
                         style="warning")
        for note in bug.notes:
            cell += Text(f"\n{note}", style="muted")
        table.add_row(Text("✓" if bug.caught else "✗", style=style),
                      Text(bug.id, style="bug.id" if bug.caught else "check.fail"), cell)
    out.print(table)
    missed = [b for b in grade.bugs if not b.caught]
    if missed:
        out.print()
        out.print(Text("Tests that would catch what you missed", style="label"))
        for bug in missed:
            out.print(Text("  ● ", style="bug.id") + Text(bug.id, style="bug.id") + Text(f" — {bug.title}"))
            out.print(Padding(Text(bug.test_idea, style="hint"), (0, 0, 0, 4), expand=False))
    out.print()
    caught, total = len(grade.caught), len(grade.bugs)
    text = f"Score: {caught}/{total} known bugs caught ({grade.score:.0%})"
    if grade.wrong:
        text += f"; {_count(len(grade.wrong), 'wrong test')} to fix first"
    out.print(Text(text, style="score.good" if grade.ok and caught == total else "score.bad"))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
