"""Rendering for hints, solutions, watch mode, mock screens (the live status line, the closing
summary and report.md's Markdown), discussion review, history, progress.

A render-only module beside render/check.py (same Theme and consoles): it formats what the library
returns and computes nothing.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from attn_kit.render import check, content, screen
from attn_kit.render.check import console
from attn_kit.render.pager import paged


def _out(out: Console | None) -> Console:
    return out or console()


def when(text_or_time, now: datetime | None = None) -> str:
    """A stored UTC time as local 'YYYY-MM-DD HH:MM'."""
    moment = datetime.fromisoformat(text_or_time) if isinstance(text_or_time, str) else text_or_time
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def span(delta: timedelta) -> str:
    """A duration in words: 'now', '10 minutes', '3 days'."""
    seconds = delta.total_seconds()
    if seconds <= 30:
        return "now"
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size:
            count = round(seconds / size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return "1 minute"


def minutes_text(minutes: float) -> str:
    """'1 minute', '45 minutes', '0.5 minutes'."""
    return f"{minutes:g} minute{'' if minutes == 1 else 's'}"


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


# --- hints --------------------------------------------------------------------------------------

STEPS = {"question": "a question to start from", "concept": "the idea", "code": "near-code"}  # catalog.HINT_STEPS


def hints(exercise, shown, used: int, out: Console | None = None) -> None:
    out = _out(out)
    total = len(exercise.hints)
    steps = STEPS
    for item in shown:
        line = Text(f"Hint {item.level}/{total} ", style="hint") + Text(item.hint.title, style="label")
        if item.hint.step in steps:
            line += Text(f" · {steps[item.hint.step]}", style="muted")
        out.print(line)
        if getattr(item, "because", ""):
            out.print(Padding(Text(f"on {item.because}, which failed in your last check", style="muted"), (0, 0, 0, 2)))
        out.print(Padding(content.content(item.hint.text), (0, 0, 0, 2)))
        if item.hint.checks:
            out.print(Padding(Text("helps with: " + ", ".join(item.hint.checks), style="muted"), (0, 0, 0, 2)))
        following = next((n for n, h in enumerate(exercise.hints, 1) if n > item.level and h.title == item.hint.title), None)
        if following and not any(s.level == following for s in shown):
            out.print(
                Padding(
                    Text("next on this topic: ", style="muted") + Text(f"attn-kit hint {exercise.id} --level {following}", style="command"),
                    (0, 0, 0, 2),
                )
            )
        out.print()
    tail = (
        f"{total - used} more: attn-kit hint {exercise.id}"
        if used < total
        else f"that was every hint; `attn-kit solution {exercise.id}` now shows the reference"
    )
    out.print(Text(f"Hints used for {exercise.id}: {used} of {total} — {tail}.", style="muted"))


def after_check(recorded, report, out: Console | None = None) -> None:
    """The lines printed after a check report: on a full pass, what it unlocked and what comes
    next; hints used; cards the kit just rated."""
    out = _out(out)
    if report.passed and not report.public_only:
        passed_next(report.exercise, recorded, out)
    if recorded.hints_total:
        line = Text(f"Hints used: {recorded.hints_used} of {recorded.hints_total}.", style="muted")
        if not report.passed and recorded.hints_used < recorded.hints_total:
            line += Text(" Stuck? ", style="muted") + Text(f"attn-kit hint {report.exercise}", style="command")
            if recorded.next_hint:  # named, so the user knows it is about this failure
                hint = catalog_hint(report.exercise, recorded.next_hint)
                step = f" ({STEPS[hint.step]})" if hint.step in STEPS else ""  # a topic's hints share a title
                line += Text(f" shows hint {recorded.next_hint}, “{hint.title}”{step}", style="muted")
                seen = recorded.seen_on_topic
                if seen:  # the report's pointer names the topic's first hint: say it was seen, so the two agree
                    levels = " and ".join(str(n) for n in seen)
                    line += Text(f", after hint{'s' if len(seen) > 1 else ''} {levels}, which you have seen", style="muted")
                line += Text(".", style="muted")
        out.print(line)
    if recorded.ratings:
        from attn_kit.practice.store import now

        at = now()
        concepts = sorted({r.concept for r in recorded.ratings})
        soonest = min(r.due for r in recorded.ratings)
        when = "due now" if soonest <= at else f"due again in {span(soonest - at)}"
        count = len(recorded.ratings)
        out.print(
            Text(
                f"Review: this run shows the {', '.join(concepts)} mistake, so {count} "
                f"{'card' if count == 1 else 'cards'} you reviewed before came back ({when}; "
                f"attn-kit discuss).",
                style="muted",
            )
        )


def passed_next(exercise_id: str, recorded, out: Console | None = None) -> None:
    """After a recorded full pass: the reference walkthrough it opened (said as news the first
    time, as a pointer after), then the follow-ups, those already passed marked. `recorded` None
    (one of the kit's own files, never recorded): the follow-ups alone."""
    from attn_kit.load import catalog

    out = _out(out)
    command = Text(f"attn-kit solution {exercise_id}", style="command")
    if recorded is not None and recorded.unlocked:
        out.print(Text("Unlocked: ", style="score.good") + Text("the reference walkthrough — ") + command)
    elif recorded is not None:
        out.print(Text("Compare with the reference walkthrough: ", style="muted") + command)
    check.followups(catalog.exercise(exercise_id), out, recorded.passed if recorded is not None else ())


def catalog_hint(exercise_id: str, level: int):
    from attn_kit.load import catalog

    return catalog.exercise(exercise_id).hints[level - 1]


def not_recorded_bundled(path, out: Console | None = None) -> None:
    _out(out).print(bundled_note(path))


def history_note(path) -> Text:
    """What the first check says once, where the history file is kept (history_created)."""
    return Text(
        f"attn-kit keeps your practice history in {path} (set ATTN_KIT_HOME to keep it elsewhere; `attn-kit history --where` prints it).",
        style="muted",
    )  # wrapped at spaces: a path stays whole


def bundled_note(path) -> Text:
    """What a check of one of the kit's own files says instead of saving it (not_recorded_bundled)."""
    return Text(
        f"Not saved to your history: {Path(path).name} is one of attn-kit's own solution files. Check your own file to record progress.",
        style="muted",
    )


def history_created(path, out: Console | None = None) -> None:
    """Said once, when the history file is first created (on stderr, so --json stays clean)."""
    out = out or check.error_console()
    out.print(history_note(path))


# --- solution, reset ----------------------------------------------------------------------------


def solution(exercise, files, forced: bool, out: Console | None = None) -> None:
    """The reference's files, highlighted and numbered, through the pager on a terminal. A source
    line is never wrapped: the pager gets it whole (the default pager scrolls sideways), a pipe
    gets it whole, a terminal without a pager crops it at its edge."""
    from rich.syntax import Syntax  # here: highlighting's imports serve this one view

    out = _out(out)
    with paged(out, chop=True) as paging:
        for item in files:
            out.print(Rule(Text(f"{exercise.id} · {item.path.name}", style="label")))
            code = Syntax(item.text, "python", line_numbers=True, word_wrap=False, theme="ansi_dark", background_color="default")
            with _widened(out, _code_width(item.text) if paging or not out.is_terminal else 0):
                out.print(code)
        if forced:
            out.print(Text("Shown with --force; recorded in your history.", style="muted"))


def _code_width(text: str) -> int:
    """Columns a numbered Syntax needs to show every line of `text` whole."""
    lines = text.splitlines() or [""]
    gutter = len(str(len(lines))) + 3  # the number, its padding and the separating space
    return gutter + max(len(line.expandtabs(4)) for line in lines) + 1


@contextlib.contextmanager
def _widened(out: Console, width: int):
    """`out` at least `width` columns wide inside (rich crops an unwrapped line at its width)."""
    before = out.width
    if width > before:
        out.width = width
    try:
        yield
    finally:
        out.width = before


def reset_done(path: Path, backup: Path | None, out: Console | None = None) -> None:
    out = _out(out)
    out.print(Text("Wrote a fresh starter to ", style="muted") + Text(str(path), style="label"))
    if backup:
        out.print(Text("Your previous version is saved at ", style="muted") + Text(str(backup), style="label"))


def reset_declined(path: Path, out: Console | None = None) -> None:
    _out(out).print(Text("Nothing changed: ", style="label") + Text(f"{path} is as it was.", style="muted"))


# --- watch mode ---------------------------------------------------------------------------------


def watch_screen(
    path: Path,
    report=None,
    error: str = "",
    exercise=None,
    recorded=None,
    mode: str = "events",
    note: str = "",
    runs: int = 0,
    out: Console | None = None,
) -> None:
    """Clear the terminal and show only the current state (the clear is skipped when piped)."""
    out = _out(out)
    out.clear()
    if report is not None:
        screen.report(report, exercise, out, brief=True)  # the first screen fits 80×24
        if recorded is not None:
            after_check(recorded, report, out)
    else:
        out.print(Text("attn-kit check ", style="label") + Text(str(path), style="muted"))
        out.print(Text("Error: ", style="error") + Text(error))
    out.print()
    if note:
        out.print(Text(f"note: {note}", style="warning"))
    how = "file events" if mode == "events" else "polling"
    # the keys first: a narrow terminal cuts the end of the line, never wraps it
    out.print(
        Text("save re-runs · r re-run · q quit", style="command") + Text(f" · run {runs} · watching {path} ({how})", style="muted"),
        no_wrap=True,
        overflow="ellipsis",
    )


# --- mock screens -------------------------------------------------------------------------------


def mock_intro(exercise, file: Path, minutes: float, out: Console | None = None) -> None:
    out = _out(out)
    content.statement(exercise, out, page=False)
    out.print()
    out.print(
        Panel(
            Group(
                Text("Mock screen: ", style="label") + Text(f"{exercise.title}, {minutes_text(minutes)}."),
                Text("Open this file in your editor: ", style="muted") + Text(str(file), style="command"),
                Text("Each save re-runs the public examples; the full graded suite runs at the end.", style="muted"),
                Text("s", style="command")
                + Text(" submit · ", style="muted")
                + Text("Ctrl-C", style="command")
                + Text(" stop (asks: submit or abandon)", style="muted"),
            ),
            expand=False,
        )
    )
    out.print(Text("session file: ", style="muted") + Text(str(file)))


# The status line's layouts, most spacious first: separator, "left" after the clock, the label
# before the public score, the word before the failing names, the save count.
MOCK_LAYOUTS = (
    ("  │  ", " left", "public checks ", "  failing: ", True),
    (" │ ", " left", "public checks ", "  failing: ", True),
    (" │ ", " left", "public checks ", "  failing: ", False),
    (" │ ", " left", "public ", " failing: ", False),
    (" │ ", " left", "", " ✗ ", False),
    (" │ ", "", "", " ✗ ", False),
)


def mock_status(remaining: float, status, width: int | None = None) -> Text:
    """The one live status line, fitted to `width` (the terminal's): as many of the failing
    checks' names as fit, whole, then "+N more"; to fit more names the separators shrink, the
    save count goes, then the words around the score. It never wraps."""
    width = width or console().width
    failing = len(status.failing) if status.total and not (status.running or status.error) else 0
    line = Text()
    for names in range(failing, -1, -1):  # the failing names matter more than the words around them
        for layout in MOCK_LAYOUTS:
            line = _mock_status(remaining, status, names, *layout)
            if line.cell_len <= width - 1:
                return line
    line.no_wrap, line.overflow = True, "ellipsis"
    line.truncate(width - 1, overflow="ellipsis")
    return line


def _mock_status(remaining: float, status, names: int, sep: str, left: str, label: str, failing: str, saves: bool) -> Text:
    line = Text("⏱ ", style="label") + Text(f"{clock(remaining)}{left}", style="label") + Text(sep, style="muted")
    if status.running:
        line += Text("running the public checks…", style="muted")
    elif status.error:
        line += Text("can't load: ", style="check.fail") + Text(status.error)
    elif status.total:
        style = "check.pass" if status.passed == status.total else "check.fail"
        line += Text(f"{label}{status.passed}/{status.total}", style=style)
        if status.failing and names:
            shown = ", ".join(status.failing[:names])
            more = f" +{len(status.failing) - names} more" if len(status.failing) > names else ""
            line += Text(failing + shown + more, style="muted")
        elif status.failing:
            line += Text(f", {len(status.failing)} failing", style="muted")
    else:
        line += Text("waiting for the first save", style="muted")
    if saves:  # "saves 0" too: the line keeps one format from the first second (issue 36, N2)
        line += Text(f"{sep}saves {status.saves}", style="muted")
    line += Text(f"{sep}s submit", style="muted")
    return line


@contextlib.contextmanager
def mock_live(out: Console | None = None):
    out = _out(out)
    with Live(Text(""), console=out, auto_refresh=False, transient=False, redirect_stdout=False, redirect_stderr=False) as live:
        yield lambda renderable: live.update(renderable, refresh=True)


def mock_ended(reason, used: float, out: Console | None = None) -> None:
    from attn_kit.practice.mock import MockStatus

    words: dict[str, str] = {MockStatus.SUBMITTED: "Submitted", MockStatus.TIME_UP: "Time is up", MockStatus.INTERRUPTED: "Stopped"}
    _out(out).print(Text(f"{words.get(reason, reason)} after {clock(used)}.", style="label"))


def mock_heading(text: str, out: Console | None = None) -> None:
    out = _out(out)
    out.print()
    out.print(Rule(Text(text, style="label")))


def discussion_question(index: int, count: int, question, out: Console | None = None) -> None:
    out = _out(out)
    out.print(Text(f"Question {index}/{count} ", style="label") + Text(f"({question.concept})", style="muted"))
    out.print(Padding(Text(question.prompt), (0, 0, 0, 2)))
    out.print(Text("Answer as you would aloud; an empty line ends your answer.", style="muted"))


def key_points_intro(out: Console | None = None) -> None:
    _out(out).print(Text("Key points an interviewer listens for — mark each one you covered:", style="label"))


def key_point(number: int, text: str, out: Console | None = None, required: bool = False) -> None:
    _out(out).print(check.hanging(f"  {number}. ", Text(text) + (Text("  (required)", style="label") if required else Text(""))))


def model_answer(question, out: Console | None = None) -> None:
    """A question's model answer (Markdown through render/content.py, so its code stays code) and
    where its facts come from."""
    out = _out(out)
    if question.answer:
        out.print(Padding(Text("Model answer:", style="label"), (0, 0, 0, 2)))
        out.print(Padding(content.content(question.answer), (0, 0, 0, 4)))
    if question.source:  # the reference, without the name of the test that checks it
        where = question.source.split("; checked by ")[0]
        out.print(Padding(Text("Source: " + where, style="muted"), (0, 0, 0, 4)))


def discussion_score(covered: int, total: int, out: Console | None = None) -> None:
    _out(out).print(Text(f"  covered {covered} of {total}", style="check.pass" if covered == total else "muted"))


def followups(exercise, out: Console | None = None, answers: bool = False) -> None:
    out = _out(out)
    if not exercise.followups:
        return
    out.print(Text("Follow-up prompts an interviewer may ask next:", style="label"))
    for item in exercise.followups:
        out.print(check.hanging("  • ", Text(item.prompt)))
        if answers and item.answer:
            out.print(Padding(Text("expected: ", style="muted") + Text(item.answer), (0, 0, 0, 4)))


def mock_report_written(path: Path, summary: str, out: Console | None = None) -> None:
    out = _out(out)
    out.print()
    out.print(Text(summary, style="label"))
    out.print(Text("Report: ", style="muted") + Text(str(path), style="command"))


def mock_finished(path: Path, status: str, report, discussion, out: Console | None = None) -> None:
    """The last lines of a mock screen: its outcome (checks, points, key points covered) and the report."""
    from attn_kit.practice.mock import MockStatus

    if status == MockStatus.ABANDONED:
        summary = "Session abandoned (recorded as abandoned)."
    elif report is not None:
        got, most = report.points
        summary = f"Mock {status}: {report.score[0]}/{report.score[1]} checks, {got}/{most} points" + (
            ", passed." if report.passed else "."
        )
    else:
        summary = f"Mock {status}: the file could not be graded."
    if discussion:
        covered = sum(sum(d.covered) for d in discussion)
        total = sum(len(d.covered) for d in discussion)
        summary += f" Discussion: {covered}/{total} key points."
    mock_report_written(path, summary, out)


def self_assessment_intro(open_rows: list[dict], out: Console | None = None) -> None:
    """Before a solo candidate scores themselves: what the kit scored, what is left, how to answer."""
    from attn_kit.grading.rubric import LEVELS

    out = _out(out)
    mock_heading("Score yourself", out)
    left = ", ".join(row["dimension"] for row in open_rows)
    out.print(
        Text(
            f"The kit scored what it could; {left} {'is' if len(open_rows) == 1 else 'are'} yours to score. "
            "Give each the highest anchor that fully holds (1 when none does); Enter skips one, "
            "Ctrl-D stops. The recommendation comes only from the scores given.",
            style="muted",
        )
    )
    out.print(Text(f"First, your level ({', '.join(LEVELS)}): its rule turns the scores into a recommendation.", style="muted"))


def self_score_dimension(row: dict, index: int, count: int, out: Console | None = None) -> None:
    """One dimension to score: its name and its four anchors, 1 to 4."""
    out = _out(out)
    out.print()
    capped = f" (a hint used caps it at {row['cap']})" if row.get("cap") else ""
    out.print(Text(f"{row['dimension']} ", style="label") + Text(f"({index}/{count}){capped}", style="muted"))
    for number, anchor in enumerate(row["anchors"], 1):
        out.print(check.hanging(f"  {number}  ", Text(anchor)))


def self_assessed(data: dict, given: dict[str, int], path: Path, out: Console | None = None) -> None:
    """The recommendation from the scores given (mock.report_data's dict, with them and the level)
    and where they were recorded."""
    out = _out(out)
    level = data.get("level") or "mid"
    out.print()
    out.print(Rule(Text(f"Recommendation ({level} level, from the scores given)", style="label")))
    for line in recommendation_lines(data["recommendation"], data["exercise"], data["scoring"], level):
        plain = line.removeprefix("- ").replace("**", "").replace("`", "")
        out.print(check.hanging("  ", Text(plain, style="label" if plain.startswith("Recommendation") else "")))
    scored = ", ".join(f"{d} {s}" for d, s in given.items())
    out.print(Text(f"Recorded ({scored}) in ", style="muted") + Text(str(path), style="command"))


def mock_report_markdown(data: dict) -> str:
    """report.md of a mock screen, from mock.report_data's dict (the same data as report.json)."""
    lines = [f"# Mock screen: {data['title']} (`{data['exercise']}`)", ""] + _summary_markdown(data)
    if data.get("scoring"):
        lines += _scoring_markdown(data["scoring"])
    if data.get("recommendation"):
        level = data.get("level")
        lines += ["", "## Recommendation", ""] + (
            [f"- Level: {level} (its rule turns the scores into the recommendation)"] if level else []
        )
        lines += recommendation_lines(data["recommendation"], data["exercise"], data.get("scoring"), level)
    if data["checks"]:
        lines += ["", "## Checks", "", "| check | status | points | bug |", "|---|---|---|---|"]
        for c in data["checks"]:
            lines.append(f"| {c['id']} | {c['status']} | {c['points']}/{c['max_points']} | {c['bug'] or ''} |")
    if data["diagnosis"]:
        lines += ["", "## Bugs diagnosed", ""]
        lines += [f"- `{d['bug']}`: {d['title']}. {d['evidence']}" for d in data["diagnosis"]]
    if data["discussion"]:
        lines += ["", "## Discussion (self-scored)", ""]
        for d in data["discussion"]:
            lines += _discussion_markdown(d)
    if data["followups"]:
        lines += ["", "## Follow-up prompts", ""] + [f"- {f}" for f in data["followups"]]
    if data["solution"] is not None:
        lines += ["", "## Final solution file", "", f"`{data['solution_file']}`", "", "```python", data["solution"].rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def _summary_markdown(data: dict) -> list[str]:
    """The bullet list at the top of report.md: status, times, seed, score, hints and --locate used."""
    used = clock(data["seconds_used"])
    lines = [
        f"- Status: **{data['status']}**",
        f"- Started: {data['started_at']}",
        f"- Time used: {used} of {data['minutes']:g}:00",
        f"- Seed: {data['seed']} (replay with `attn-kit check solution.py --seed {data['seed']}`)",
    ]
    score = data["score"]
    if score:
        verdict = "passed" if data["passed"] else "not passed"
        lines.append(
            f"- Score: {score['passed']}/{score['total']} checks, "
            f"{score.get('points', '?')}/{score.get('max_points', '?')} points ({verdict})"
        )
    hints = data["hints"]
    lines.append(
        f"- Hints used during the session: {len(hints['used_during_session'])} "
        f"({hints['used_in_total']} of {hints['available']} used in total)"
    )
    if data.get("locate", {}).get("used_during_session"):
        lines.append(f"- `check --locate` used during the session: {data['locate']['runs']} time(s)")
    return lines


def _scoring_markdown(scoring: list[dict]) -> list[str]:
    """The scores section of report.md: a table of the dimensions with their anchors, and why
    correctness got its score."""
    lines = [
        "",
        "## Scores (1-4 per dimension)",
        "",
        "Correctness is scored from the causes the diagnosis found (how many, how severe, whether "
        "the file runs); score the other dimensions at the highest anchor that fully holds (1 when none "
        "does). Each hint "
        "used caps its dimension at 3.",
        "",
        "| dimension | score | cap | 1 | 2 | 3 | 4 |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in scoring:
        score = "–" if row["score"] is None else f"{row['score']}/4" + (" (self)" if row.get("given_by") == "self" else "")
        cap = f"3 (hint {', '.join(map(str, row['capped_by']))})" if row["cap"] else ""
        anchors = [a.replace("|", "\\|") for a in row["anchors"]]
        lines.append(f"| {row['dimension']} | {score} | {cap} | " + " | ".join(anchors) + " |")
    for row in scoring:
        if row.get("why") and row["dimension"] in ("correctness", "systems"):
            lines += ["", f"{row['dimension'].capitalize()}: {row['why']}."]
    return lines


def _discussion_markdown(d: dict) -> list[str]:
    """One discussion question of report.md: the answer given and the key points covered."""
    required = [p for p in d["key_points"] if p.get("required")]
    got = sum(p["covered"] for p in required)
    lines = [
        f"### {d['prompt']}",
        "",
        f"Covered {d['covered']} of {d['total']} key points" + (f" ({got} of {len(required)} required)." if required else "."),
        "",
    ]
    if d["answer"]:
        lines += ["Your answer:", ""] + [f"> {line}" for line in d["answer"].splitlines()] + [""]
    lines += [f"- [{'x' if p['covered'] else ' '}] {p['text']}" + (" *(required)*" if p.get("required") else "") for p in d["key_points"]]
    lines.append("")
    return lines


def recommendation_lines(
    recommendation: dict, exercise: str | None = None, scoring: list[dict] | None = None, level: str | None = None
) -> list[str]:
    """The recommendation of a mock's scores (mock.recommendation's dict) as Markdown lines. It
    comes only from the scores given: a verdict once they decide it, else none yet, with what the
    given scores already rule out, and (with `exercise` and `scoring`) how someone practising alone
    gives the missing scores and gets the verdict."""
    from attn_kit.grading.rubric import DEFAULT_LEVEL, VERDICTS

    verdict, (worst, best) = recommendation["verdict"], recommendation["range"]
    if verdict:
        return [f"- Recommendation: **{verdict}**"] + [f"- {reason}" for reason in recommendation["reasons"]]
    if worst == best:
        return [f"- Recommendation: **{worst}**, whatever the scores still to give"] + [f"- {r}" for r in recommendation["reasons"]]
    lines = [f"- Recommendation: none yet: it comes only from the scores given ({'; '.join(recommendation['reasons'])})."]
    if best != VERDICTS[0].name:
        lines.append(f"- The scores given already rule out anything better than **{best}**.")
    if exercise and scoring:
        filled = ",".join(f"{row['dimension']}={'?' if row['score'] is None else row['score']}" for row in scoring)
        at = f" --level {level}" if level and level != DEFAULT_LEVEL else ""
        lines.append(
            "- Practising alone? Score each dimension without a score yourself, at the highest anchor "
            "in the table above that fully holds (1 when none does), then replace each ? in "
            f"`attn-kit mock {exercise} --interviewer --scores {filled}{at}` and run it: it prints the "
            "recommendation and the reasons."
        )
    return lines


def _rule(out: Console, scores: dict[str, int] | None, level: str | None = None) -> None:
    """The written rule that turns the six scores into a recommendation at a level; with `scores`,
    its verdict and the reasons."""
    from attn_kit.grading.rubric import DEFAULT_LEVEL, RULES, floors, recommend, verdicts

    level = level or DEFAULT_LEVEL
    out.print(Rule(Text(f"Recommendation ({level} level)", style="label")))
    out.print(Text("The first line whose floors the six scores all meet:", style="muted"))
    for verdict in verdicts(level):
        out.print(Text(f"  {verdict.name:<13}", style="label") + Text(floors(verdict)))
    for rule in RULES:
        out.print(check.hanging("  • ", Text(rule, style="muted")))
    if scores:
        recommended, reasons = recommend(scores, level)
        out.print(Text("Scores given:", style="label"))
        out.print(Padding(Text(", ".join(f"{d} {s}" for d, s in scores.items())), (0, 0, 0, 2)))
        out.print(Text("Recommendation: ", style="label") + Text(recommended, style="label"))
        for reason in reasons:
            out.print(Padding(Text("– " + reason), (0, 0, 0, 2)))


def _scoring(exercise, out: Console) -> None:
    """The scored rubric: four anchors per dimension, which hints cap it, checkpoints, seniority."""
    from attn_kit.grading.rubric import MANY_CAUSES

    out.print(Rule(Text("Scoring: 1 to 4 per dimension", style="label")))
    out.print(
        Text(
            "Give each dimension the highest level whose description fully holds (1 when none does): the "
            "levels are ordered, each asks more than the one below. Each hint the candidate used caps its dimension at 3. "
            "Correctness is scored by the kit from the diagnosed causes: a cause that crashes on ordinary "
            "inputs allows 1, one wrong on ordinary inputs 2, one that shows only at an edge 3; "
            f"{MANY_CAUSES} or more causes lower the score by one.",
            style="muted",
        )
    )
    levels: dict[str, list[int]] = {}
    for number, hint in enumerate(exercise.hints, 1):
        levels.setdefault(hint.dimension or "correctness", []).append(number)
    for item in exercise.scoring:
        capped = levels.get(item.dimension)
        out.print(
            Text(item.dimension, style="label")
            + (Text(f"  (hints {', '.join(map(str, capped))} cap it at 3)", style="muted") if capped else Text(""))
        )
        for score, anchor in enumerate(item.anchors, 1):
            out.print(Padding(Text(f"{score}  ", style="label") + Text(anchor), (0, 0, 0, 4)))
    if exercise.checkpoints:
        out.print(Rule(Text(f"Time checkpoints ({exercise.minutes}-minute screen)", style="label")))
        for item in exercise.checkpoints:
            out.print(Text(f"  {item.minute:>3} min  ", style="label") + Text(item.expect))
    if exercise.seniority:
        out.print(Rule(Text("Expectations by seniority", style="label")))
        for item in exercise.seniority:
            out.print(Text(f"  {item.level}: ", style="label") + Text(item.expect))


def interviewer_sheet(exercise, out: Console | None = None, scores: dict[str, int] | None = None, level: str | None = None) -> None:
    """`mock --interviewer`: statement, rubric, the recommendation rule at `level` (applied to
    `scores` when given: dimension -> 1..4, all six), what to watch for, questions, follow-ups."""
    out = _out(out)
    out.print(Rule(Text(f"Interviewer sheet · {exercise.title} · {minutes_text(exercise.minutes)}", style="label")))
    content.statement(exercise, out, page=False)
    if exercise.scoring:
        _scoring(exercise, out)
        _rule(out, scores, level)
    if exercise.rubric:
        out.print(Rule(Text("What to watch for", style="label")))
        for item in exercise.rubric:
            out.print(check.hanging("  • ", Text(item.watch_for, style="label")))
            if item.why:
                out.print(Padding(Text(item.why, style="muted"), (0, 0, 0, 4)))
    if exercise.questions:
        out.print(Rule(Text("Discussion questions and key points", style="label")))
        for number, question in enumerate(exercise.questions, 1):
            out.print(
                Text(f"{number}. ", style="label") + Text(question.prompt, style="label") + Text(f"  ({question.concept})", style="muted")
            )
            for index, point in enumerate(question.key_points):
                mark = Text("(required) ", style="label") if index in question.required else Text("")
                out.print(Padding(Text("– ") + mark + Text(point), (0, 0, 0, 4)))
            model_answer(question, out)
    followups(exercise, out, answers=True)


# --- discussion review --------------------------------------------------------------------------


def card_front(index: int, count: int, entry, out: Console | None = None, current: str | None = None) -> None:
    """The card's rule names its exercise: answers differ between exercises (a fully masked query
    outputs the output bias in one exercise, zeros in another)."""
    out = _out(out)
    out.print()
    state = "new" if entry.is_new else "due"
    mark = " (your current exercise)" if current == entry.exercise.id else ""
    # past the deck: a card rated earlier that came due again during the session (the count stays)
    where = f"Card {index}/{count} · {state}" if index <= count else "Again · came back during this session"
    out.print(Text(f"{where} · {entry.question.concept}", style="muted"))
    out.print(Text(f"Exercise: {entry.exercise.id}{mark} — {entry.exercise.title}", style="muted"))
    out.print(Text(entry.question.prompt, style="label"))


def answer_prompt(out: Console | None = None) -> None:
    _out(out).print(Text("Your answer, as you would say it; an empty line ends it and shows the key points:", style="muted"))


def card_back(entry, out: Console | None = None) -> None:
    out = _out(out)
    out.print(Text("Key points:", style="label"))
    for index, point in enumerate(entry.question.key_points):
        required = index in entry.question.required
        out.print(check.hanging("  • ", Text(point) + (Text("  (required)", style="label") if required else Text(""))))
    model_answer(entry.question, out)


def card_scheduled(due: datetime, at: datetime, out: Console | None = None) -> None:
    delta = due - at
    text = "due again now" if delta.total_seconds() <= 30 else f"next due in {span(delta)}"
    _out(out).print(Text(f"  {text}", style="muted"))


def nothing_to_review(outlook, due_only: bool, new: int = 5, out: Console | None = None) -> None:
    out = _out(out)
    if due_only:
        out.print(Text("No card is due now.", style="label"))
    elif new == 0 and outlook.new:
        out.print(Text(f"No card is due now, and --new 0 asked for no new question ({outlook.new} left).", style="label"))
    else:
        out.print(Text("No card is due and no new question is left.", style="label"))
    discuss_summary(0, outlook, out)


def discuss_stopped(out: Console | None = None) -> None:
    _out(out).print(Text("\nStopped; every card rated so far is saved.", style="muted"))


def discuss_summary(reviewed: int, outlook, out: Console | None = None) -> None:
    out = _out(out)
    out.print()
    out.print(
        Text(f"Reviewed {reviewed} card{'s' if reviewed != 1 else ''}. ", style="label")
        + Text(
            f"Due now: {outlook.due_now} · due by tomorrow: {outlook.due_tomorrow} · "
            f"due within a week: {outlook.due_week} · new questions: {outlook.new} of {outlook.total}."
        )
    )


# --- history, progress --------------------------------------------------------------------------


def _score(row) -> str:
    if row.get("checks_total") is None:
        return "–"
    return f"{row['checks_passed']}/{row['checks_total']} ({row['points']}/{row['max_points']} pts)"


def _entries() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def history(data: dict, out: Console | None = None) -> None:
    """The history, through the pager on a terminal."""
    out = _out(out)
    with paged(out):
        _history(data, out)


def _history(data: dict, out: Console) -> None:
    if not any(data.values()):
        out.print(
            Text("No history yet: run ", style="muted")
            + Text("attn-kit check FILE", style="command")
            + Text(", ", style="muted")
            + Text("attn-kit mock", style="command")
            + Text(" or ", style="muted")
            + Text("attn-kit discuss", style="command")
            + Text(".", style="muted")
        )
        return
    # One line per entry: the time in its own column, never wrapped; the rest wraps at word
    # boundaries under its own indent, so no time, bug id or path is ever cut.
    if data["checks"]:
        _history_checks(data["checks"], out)
    if data["mocks"]:
        _history_mocks(data["mocks"], out)
    if data["reviews"]:
        out.print(Text("Reviews", style="label"))
        grid = _entries()
        names = {1: "again", 2: "hard", 3: "good", 4: "easy"}
        for row in data["reviews"]:
            by = "you" if row["source"] == "discuss" else ("you, in a mock" if row["source"] == "mock" else f"kit: {row['source']}")
            # the card as `discuss` names it (exercise · concept), and when it is due as `discuss`
            # said it then (a span, not a second date that would wrap)
            topic = f"{row['exercise']} · {row.get('concept') or row['question']}"
            delta = datetime.fromisoformat(row["due"]) - datetime.fromisoformat(row["at"])
            due = "due again now" if delta.total_seconds() <= 30 else f"next due in {span(delta)}"
            grid.add_row(when(row["at"]), Text(f"{topic}  {names.get(row['rating'], str(row['rating']))} ({by})  {due}"))
        out.print(grid)
        out.print()
    extra = [f"{when(r['at'])} hint {r['level']} of {r['exercise']}" for r in data["hints"]]
    extra += [f"{when(r['at'])} solution of {r['exercise']}" + (" (forced)" if r["forced"] else "") for r in data["solution_views"]]
    if extra:
        out.print(Text("Hints and solutions", style="label"))
        for entry in sorted(extra, reverse=True):
            out.print(Text("  " + entry))


def _history_checks(rows: list[dict], out: Console) -> None:
    out.print(Text("Check runs", style="label"))
    grid = _entries()
    for row in rows:
        result = Text("pass", style="check.pass") if row["passed"] else Text("fail", style="check.fail")
        how = row["source"] + (" --public" if row["public_only"] else "")
        line = Text(f"{row['exercise']}  ") + result + Text(f"  {_score(row)}  {how}", style="")
        if row["bugs"]:
            line += Text("  bugs: ", style="muted") + Text(", ".join(row["bugs"]), style="bug.id")
        grid.add_row(when(row["at"]), line)
    out.print(grid)
    out.print()


def _history_mocks(rows: list[dict], out: Console) -> None:
    out.print(Text("Mock screens", style="label"))
    for row in rows:
        covered = sum(d.get("covered", 0) for d in row["discussion"])
        points = sum(d.get("total", 0) for d in row["discussion"])
        used = f"{clock(row['seconds_used'])} of {row['minutes']:g} min" if row["seconds_used"] is not None else "–"
        line = Text(f"{row['exercise']}  {row['status']}  {used}  {_score(row)}")
        if points:
            line += Text(f"  discussion {covered}/{points} points")
        grid = _entries()
        grid.add_row(when(row["started_at"]), line)
        out.print(grid)
        if row["report"]:  # the path whole, on its own line: the terminal wraps it, nothing cuts it
            out.print(Text(" " * 18 + "report: ", style="muted") + Text(row["report"]), soft_wrap=True)
    out.print()


def progress(rows, out: Console | None = None) -> None:
    out = _out(out)
    table = Table(header_style="label", box=None, pad_edge=False)
    for column in ("exercise", "runs", "best", "last", "hints", "cards due", "mocks"):
        table.add_column(column, no_wrap=True)
    for row in rows:
        best = Text(f"{row.best[0]}/{row.best[1]}", style="check.pass" if row.passed else "") if row.best else Text("–", style="muted")
        last = f"{row.last[0]}/{row.last[1]}" if row.last else "–"
        table.add_row(
            row.exercise,
            str(row.runs),
            best,
            last,
            f"{row.hints_used}/{row.hints_total}",
            f"{row.cards_due}/{row.cards_total}",
            str(row.mocks),
        )
    out.print(table)
    for row in rows:  # bug ids below the table, wrapped between ids, never cut
        if row.bugs_seen:
            out.print(check.hanging(f"bugs seen in {row.exercise}: ", Text(", ".join(row.bugs_seen), style="bug.id")))
    out.print(
        Text(
            "best and last count the full graded suite (not --public runs); cards due: "
            "discussion cards due now, of all the exercise's questions.",
            style="muted",
        )
    )
