"""The first screen of a failing check: the answer in 80×24.

What a candidate needs to act on, in this order, fitted to `rows` lines (the lines the command
prints after it, and the prompt, are left free): the verdict and score; each cause in a line or
two, the biggest first (a named bug with the wrong rows it explains, where, and its fix; a half-fix
naming the function that still has it; what lies outside the catalogue); the worst failing check
in full on its smallest case, expected beside yours (a picture when the failure is about which keys
a query sees); every other failing check in one line, as the same cause or as its own. When that
is too tall, the other checks go one line per cause, then the picture gives way to the worst row's
numbers, then the case line goes. `check --full` shows everything (render/check.py's report).
Used by `check`, `check --watch` and the mock.
"""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from attn_kit.render import check, grid
from attn_kit.render.check import MARK, _clip, _row, check_header, hanging
from attn_kit.report.results import FAILED, PROBE_EVIDENCE, CheckResult, CheckStatus, Diagnosis, Report

ROWS = 18  # 24, less the prompt and what check prints after the report (--locate's line, the hints)
BELOW = 4  # what always follows the first screen on a terminal of 24: the hints (2), the prompt, a spare


def report(
    rep: Report, exercise=None, out: Console | None = None, first: bool | None = None, brief: bool = False, after: tuple = ()
) -> None:
    """check's report. A failing run shows its first screen, by default and for watch and the mock
    (`brief`: without the footer naming check's options); `first=False` (--full) and `first=True`
    (--first) show the whole report as render/check.py's report() draws it, as does a pass.
    `after`: notes printed once after this report (where the history is kept, the first time), for
    which the first screen makes room, so that its header does not scroll off."""
    out = out or check.console()
    if (brief or first is None) and not rep.passed and any(r.status in FAILED for r in rep.results):
        first_screen(rep, out, rows=min(ROWS, 24 - BELOW - _height(out, list(after))), footer=not brief)
        return
    check.report(rep, exercise, out, first=first)


def causes(rep: Report) -> list[Diagnosis]:
    """The named bugs, the one explaining the most wrong rows first (catalogue order otherwise)."""
    return sorted(rep.diagnosis, key=lambda d: -d.explained)


def worst(rep: Report, failures: list[CheckResult]) -> CheckResult:
    """The failure to show in full: of the biggest cause's checks (those it matches or explains;
    else of all), one with a worst
    row on the smallest case (those with a picture first, rows of one entry last); a failure
    without one (raised, hung) when none has a row."""
    ranked = causes(rep)
    mine = [r for r in failures if ranked and (r.bug == ranked[0].bug or r.id in ranked[0].checks)] or failures
    with_rows = [r for r in mine if r.mismatch is not None] or [r for r in failures if r.mismatch is not None]
    if not with_rows:
        return mine[0]
    # a case with a picture of which keys each query sees first (it says at a glance what a row of
    # numbers does not); a row of one entry says little: rows of two entries or more next
    return min(
        with_rows,
        key=lambda r: (
            (grid.matrices(r) is None, r.mismatch.shape[-1:] < (2,), r.mismatch.total, failures.index(r))
            if r.mismatch
            else (True, True, 0, 0)
        ),
    )


def first_screen(rep: Report, out: Console, rows: int = ROWS, footer: bool = True) -> None:
    """Print the first screen of a failing report in at most `rows` lines where it can be;
    `footer`: end with the options that show more (check's, not watch's or the mock's)."""
    failures = [r for r in rep.results if r.status in FAILED]
    shown = worst(rep, failures)
    picture = grid.picture(shown, out.width - 2)  # indented under the failure's title
    # (each other failure on its own line, the picture, the case line), most complete first
    layouts = [(True, True, True), (False, True, True), (False, True, False), (False, False, True), (False, False, False)]
    if picture is None:
        layouts = [p for p in layouts if not p[1]] or layouts
        layouts = list(dict.fromkeys((each, False, case) for each, _, case in layouts))
    # (…, the worst row's numbers, the other failures counted on one line): last, the numbers give
    # way (the message still says where the row differs and by how much), then the other failures
    plans = [(*layout, True, False) for layout in layouts]
    plans += [(*layouts[-1], False, False), (*layouts[-1], False, True)]
    for each, draw, case, numbers, counted in plans:
        lines = _screen(rep, failures, shown, picture if draw else None, out, each_line=each, case=case, numbers=numbers, counted=counted)
        if footer:
            lines.append(_footer(rep, failures, out.width))
        if _height(out, lines) <= rows:
            break
    for line in lines:
        out.print(line)


def _height(out: Console, renderables: list) -> int:
    return sum(len(out.render_lines(r, out.options, pad=False)) for r in renderables)


def _screen(
    rep: Report,
    failures: list[CheckResult],
    shown: CheckResult,
    picture,
    out: Console,
    each_line: bool,
    case: bool,
    numbers: bool = True,
    counted: bool = False,
) -> list:
    lines: list = [check_header(rep, out.width), _verdict(rep, failures, out.width)]
    lines += [_cut(Text(f"note: {note}", style="warning"), out.width) for note in rep.notes]
    lines += [_cause(d, rep, out) for d in causes(rep)]
    lines += _outside(rep, failures, out)
    lines.append(Text())
    lines += _in_full(rep, shown, picture, case, out, numbers)
    others = [r for r in failures if r is not shown]
    if counted and others:
        lines.append(Text(f"✗ {_more_checks(len(others))} failed: --full shows each", style="muted"))
    else:
        lines += [_one_line(rep, r, out.width) for r in others] if each_line else _by_cause(rep, others, out)
    return lines


def _more_checks(n: int) -> str:
    return f"{n} more check{'s' if n != 1 else ''}"


def _verdict(rep: Report, failures: list[CheckResult], width: int) -> Text:
    passed, total = rep.score
    got, most = rep.points
    skipped = sum(r.status == CheckStatus.SKIP for r in rep.results)
    tail = f", {skipped} not checked" if skipped else ""
    count = len(causes(rep))
    verdict = Text(f"✗ {len(failures)} of {total} checks failed{tail} · {passed} passed · {got}/{most} points", style="score.bad")
    if count < 2:
        return verdict
    for lead in (f"{count} known bugs, biggest first:", f"{count} known bugs:", ""):  # on the verdict's line
        if verdict.cell_len + 2 + len(lead) < width:
            break
    return verdict + Text(f"  {lead}" if lead else "", style="muted")


def _rows(d: Diagnosis) -> str:
    if not d.explained:
        return ""
    total = f" of {d.wrong_total}" if d.wrong_total else ""
    return f"{d.explained}{total} wrong rows"


def _where(d: Diagnosis, rep: Report) -> list[str]:
    """The functions of the failing calls in the checks this bug explains."""
    calls = [r.failing_call for r in rep.results if r.id in d.checks and r.failing_call is not None]
    return list(dict.fromkeys(c.fn for c in calls))


CAUSE_LINES = 2  # each cause in one or two lines


def _cause(d: Diagnosis, rep: Report, out: Console) -> object:
    """`● BUG: N of M wrong rows, in `FN`. Fix: PHRASE.` in at most two lines: the first of its
    forms that fits (fewer functions named, then no total, then no place), else cut with …. A
    half-fix says which function still has it; a probe's evidence goes under the worst failure."""
    fix = Text(" Fix: " + _phrase(d) + ".", style="hint") if _phrase(d) else Text()
    forms = [Text(d.bug, style="bug.id") + Text(f": {said}" if said else "") + fix for said in _cause_forms(d, rep)]
    return _fitted(Text("● ", style="bug.id"), forms, out)


def _phrase(d: Diagnosis) -> str:
    """The fix in a phrase (the catalogue's fix_short), else its sentence without the full stop."""
    return (d.fix_short or d.fix).strip().rstrip(".")


def _cause_forms(d: Diagnosis, rep: Report) -> list[str]:
    """What the cause says before its fix, from the fullest to the shortest."""
    rows, short = _rows(d), (f"{d.explained} wrong rows" if d.explained else "")
    if d.still_in:
        still = " and ".join(f"`{f}`" for f in d.still_in)
        fixed = " and ".join(f"`{f}`" for f in d.fixed_in)
        has = "has" if len(d.still_in) == 1 else "have"
        verb = "does" if len(d.fixed_in) == 1 else "do"
        said = f"{still} still {has} it, {fixed} no longer {verb}."
        return [f"{rows}; {said}", f"{short}; {said}", said, f"{still} still {has} it."]
    fns = _where(d, rep)
    places = ([f"in {_and(fns)}"] + ([f"in {_and(fns[:1])} +{len(fns) - 1}"] if len(fns) > 1 else [])) if fns else []
    places.append("")
    if not d.explained and d.evidence.startswith(PROBE_EVIDENCE):  # what it saw: under the worst failure, in --full
        places = [f"a probe saw it {p}".strip() for p in places]
    forms = [", ".join(p for p in (r, place) if p) for place in places for r in (rows, short)]
    return [f + "." if f else "" for f in dict.fromkeys(forms)]


def _fitted(prefix: Text, forms: list[Text], out: Console, most: int = CAUSE_LINES) -> object:
    """`prefix` then the first of `forms` that wraps to at most `most` lines, else the last one
    cut with … to fit them."""
    room = out.width - prefix.cell_len
    for body in forms:
        if len(out.render_lines(hanging(prefix, body), out.options, pad=False)) <= most:
            return hanging(prefix, body)
    return hanging(prefix, _wrapped_to(forms[-1], most, room, out))


def _outside(rep: Report, failures: list[CheckResult], console: Console) -> list:
    """What no known bug explains: failing checks with no bug of their own, as one cause."""
    rest = [r for r in failures if not r.bug and (not rep.diagnosis or r.id in rep.unexplained)]
    if not rest:
        return []
    stubs = list(dict.fromkeys(c.fn for r in rest for c in r.calls if _stub(c)))
    rest = [r for r in rest if not any(_stub(c) for c in r.calls)]
    raised = [r for r in rest if r.status == CheckStatus.ERROR]
    wrong = [r for r in rest if r.status == CheckStatus.FAIL]
    out: list = []
    if stubs:
        body = Text("not written yet", style="check.error") + Text(
            f": {_and(stubs)} still raise{'s' if len(stubs) == 1 else ''} NotImplementedError."
        )
        out.append(hanging(Text("● ", style="check.error"), body))
    if wrong:
        rows = f"{rep.wrong_rows} wrong rows, " if rep.wrong_rows and not rep.diagnosis and not raised and not stubs else ""
        fns = list(dict.fromkeys(r.failing_call.fn for r in wrong if r.failing_call is not None))
        where = f"in {_and(fns)} " if fns else ""
        count = f"{len(wrong)} check{'s' if len(wrong) > 1 else ''}"
        body = Text("outside the catalogue", style="check.fail") + Text(
            f": {rows}{where}({count}); no known bug reproduces {'them' if rows else 'these'}: read the failure below."
        )
        closest = Text(" Closest: " + rep.near_misses[0].split(" came closest", 1)[0] + ".", style="muted") if rep.near_misses else Text()
        out.append(_fitted(Text("● ", style="check.fail"), [body + closest, body], console))
    if raised:
        body = Text("your code raised, hung or crashed", style="check.error") + Text(f" in {_names(raised)}.")
        out.append(hanging(Text("● ", style="check.error"), body))
    return out


def _and(names: list[str]) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _stub(call) -> bool:
    error = call.outcome.error
    return error is not None and error.type == "NotImplementedError"


def _names(results: list[CheckResult], most: int = 2) -> str:
    names = [r.id for r in results]
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _in_full(rep: Report, r: CheckResult, picture, case: bool, out: Console, numbers: bool = True) -> list:
    """The worst failure: its title, what differs, what a probe saw of it, expected beside yours
    (or the picture), the case."""
    width = out.width
    head = Text(f"{MARK[r.status]} ", style=f"check.{r.status}") + Text(r.id, style=f"check.{r.status}") + Text(f" — {r.title}")
    if r.bug:
        head += Text("  ", style="muted") + Text(r.bug, style="bug.id")
    lines: list = [_cut(head, width)]
    body: list = []
    message = r.message.splitlines()
    if message:
        body.append(_wrapped_to(Text(message[0]), 2, width - 2, out))
    if numbers:
        body += [_wrapped_to(Text(seen, style="muted"), 2, width - 2, out) for seen in _probe_saw(rep, r)]
    m = r.mismatch
    if picture is not None:
        body += picture
    elif m is not None:
        body += _worst_row(m) if numbers else []
    elif len(message) > 1:
        body.append(Text(_clip("\n".join(message[1:4]), 400), style="muted"))
    facts = {k: v for k, v in r.case.items() if k != "seed"}  # the header has the seed
    if case and facts:
        line = Text("case: ", style="muted") + Text(", ".join(f"{k}={v}" for k, v in facts.items()))
        body.append(_clipped(line, 1, width - 2))
    if r.output.strip():
        cut = any(line.startswith("… [output truncated") for line in r.output.splitlines())  # the worker's notice
        tail = " (output truncated; --full shows what was kept)" if cut else ""
        body.append(
            Text("your code printed: ", style="muted") + _clipped(Text(r.output.strip().splitlines()[0]), 1, width - 22 - len(tail))
        )
        if tail:
            body[-1].append(tail, style="muted")
    return lines + [Padding(b, (0, 0, 0, 2), expand=False) for b in body]


def _wrapped_to(text: Text, lines: int, width: int, out: Console) -> Text:
    """`text` cut, with …, to wrap to at most `lines` lines of `width` columns (at word breaks)."""
    most = text.cell_len
    while most > 1 and len(text.wrap(out, width)) > lines:
        most -= max(1, most // 20)
        text = text.copy()
        text.truncate(most, overflow="ellipsis")
    return text


def _probe_saw(rep: Report, r: CheckResult) -> list[str]:
    """What a probe saw, for each bug it named (with no rows counted) that explains failure `r`."""
    named = [d for d in causes(rep) if r.id in d.checks and not d.explained and d.evidence.startswith(PROBE_EVIDENCE)]
    return [PROBE_EVIDENCE + d.evidence[len(PROBE_EVIDENCE) :].strip() for d in named]


def _worst_row(m) -> list[Text]:
    start = f" (from index {m.row_offset})" if m.row_offset else ""
    return [
        Text(f"worst row{start}:", style="muted"),
        Text("  expected ", style="muted") + Text(_row(m.expected_row, m.row_offset), style="expected"),
        Text("  yours    ", style="muted") + Text(_row(m.actual_row, m.row_offset), style="actual"),
    ]


def _clipped(text: Text, lines: int, width: int) -> Text:
    """`text` cut to `lines` lines of `width` columns, with … where it was cut."""
    most = lines * width - 1
    if text.cell_len <= lines * width:
        return text
    text = text.copy()
    text.truncate(most, overflow="ellipsis")
    return text


def _bugs_of(rep: Report, r: CheckResult) -> str:
    """The known bug(s) behind a failing check: its own, else the named bugs that explain it
    together; "" when it lies outside the catalogue."""
    if r.bug:
        return r.bug
    if r.id in rep.unexplained:
        return ""
    return " + ".join(d.bug for d in causes(rep) if r.id in d.checks)


STUB, RAISED, OUTSIDE = "not written yet", "raised, hung or crashed", "outside the catalogue"


def _cause_of(rep: Report, r: CheckResult) -> tuple[str, bool]:
    """(the cause a failing check is listed under, whether that is known bugs)."""
    bugs = _bugs_of(rep, r)
    if bugs:
        return bugs, True
    if any(_stub(c) for c in r.calls):
        return STUB, False
    return (OUTSIDE if r.status == CheckStatus.FAIL else RAISED), False


def _one_line(rep: Report, r: CheckResult, width: int) -> Text:
    line = Text(f"{MARK[r.status]} ", style=f"check.{r.status}") + Text(r.id, style=f"check.{r.status}")
    cause, known = _cause_of(rep, r)
    if known or cause == STUB:
        line += Text("  same cause: ", style="muted") + Text(cause, style="bug.id" if known else "check.error")
    else:
        first = r.message.splitlines()[0] if r.message else r.title
        line += Text("  its own: " + first, style="muted")
    return _cut(line, width)


def _cut(text: Text, width: int) -> Text:
    """`text` on one line of `width` columns, ending in … where it was cut (the last column free)."""
    if text.cell_len < width:
        return text
    text = text.copy()
    text.truncate(width - 1, overflow="ellipsis")
    return text


def _by_cause(rep: Report, others: list[CheckResult], out: Console) -> list:
    """The other failures, one line per cause: its checks by name, as many as fit."""
    groups: dict[tuple[str, bool], list[str]] = {}
    for r in others:
        groups.setdefault(_cause_of(rep, r), []).append(r.id)
    lines = []
    for (cause, known), ids in groups.items():
        prefix = Text("✗ also ", style="check.fail") + Text(cause, style="bug.id" if known else "") + Text(": ")
        room = out.width - 1 - prefix.cell_len
        for count in range(len(ids), 0, -1):
            more = f" +{len(ids) - count} more" if count < len(ids) else ""
            body = ", ".join(ids[:count]) + more
            if len(body) <= room or count == 1:
                break
        lines.append(_cut(prefix + Text(body, style="muted"), out.width))
    return lines


def _footer(rep: Report, failures: list[CheckResult], width: int) -> Text:
    """What shows more, in one line: --full; --locate, unless a function is still a stub (nothing
    to locate); the seed that reruns these cases."""
    parts = ["--full: each failure in full"]
    if not any(_stub(c) for r in failures for c in r.calls):
        parts.append("--locate: the line to fix")
    if not rep.public_only:
        parts.append(f"--seed {rep.seed}: same cases")
    return _cut(Text(" · ".join(parts), style="muted"), width)
