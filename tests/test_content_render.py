"""Content renders the way the terminal shows it: code stays code.

Every hint of every exercise, every statement (with its worked example), every model answer of a
discussion question and the interviewer sheet go through the functions the CLI calls, at 80 and
120 columns. The source is read as Markdown (markdown-it, the parser rich uses): each line of each
of its code blocks must come out as one line of the output, with the block's indentation kept
(one common left margin per block), and no heading, list item or code block may be lost.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import sys
from types import SimpleNamespace

import pexpect
import pytest
from markdown_it import MarkdownIt
from rich.console import Console

from attn_kit.dev import check
from attn_kit.load import catalog
from attn_kit.render import check as render
from attn_kit.render import content as render_content
from attn_kit.render import practice

from test_practice import plain

EXERCISES = list(catalog.exercises().values())
WIDTHS = (80, 120)


def console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), color_system=None, theme=render.THEME)


def parse(text: str) -> SimpleNamespace:
    """What the author wrote, as Markdown: code blocks (lists of lines), headings, list items."""
    tokens = MarkdownIt().enable("strikethrough").enable("table").parse(text)
    code = [t.content.rstrip("\n").split("\n") for t in tokens if t.type in ("code_block", "fence")]
    headings = [
        "".join(c.content for c in tokens[i + 1].children or [])  # the text, without the backticks
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    ]
    bullets = sum(t.type == "list_item_open" and t.info == "" for t in tokens)
    numbered = [t.info for t in tokens if t.type == "list_item_open" and t.info]
    return SimpleNamespace(code=code, headings=headings, bullets=bullets, numbered=numbered)


def block_shown(block: list[str], lines: list[str]) -> bool:
    """The code block's lines appear as consecutive output lines behind one common margin."""
    first = block[0]
    for i, line in enumerate(lines):
        if not line.rstrip().endswith(first.rstrip()) or not first.strip():
            continue
        margin = line.rstrip()[: len(line.rstrip()) - len(first.rstrip())]
        if margin.strip():
            continue
        window = lines[i : i + len(block)]
        if len(window) == len(block) and all(
            (got.rstrip() == (margin + want).rstrip()) if want.strip() else not got.strip() for got, want in zip(window, block)
        ):
            return True
    return False


def lost(source: str, output: str) -> list[str]:
    """What of `source`'s Markdown structure the rendered `output` lost."""
    want = parse(source)
    lines = output.splitlines()
    flat = " ".join(output.split())
    problems = [f"code block lost or reflowed: {block[0].strip()!r}" for block in want.code if not block_shown(block, lines)]
    problems += [f"heading lost: {h!r}" for h in want.headings if " ".join(h.split()) not in flat]
    shown_bullets = sum(line.lstrip().startswith("• ") for line in lines)
    if shown_bullets < want.bullets:
        problems.append(f"{want.bullets} list items, {shown_bullets} bullets shown")
    problems += [
        f"numbered item {n} lost" for n in want.numbered if not any(re.match(rf"\s*{n}\.? ", line) for line in lines)
    ]  # rich drops the period
    return problems


def shown_hint(exercise, level: int, width: int) -> str:
    out = console(width)
    practice.hints(exercise, [SimpleNamespace(level=level, hint=exercise.hints[level - 1])], level, out)
    return out.file.getvalue()


HINTS = [(e, level) for e in EXERCISES for level in range(1, len(e.hints) + 1)]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("exercise,level", HINTS, ids=[f"{e.id}-{n}" for e, n in HINTS])
def test_every_hint_keeps_its_code_and_structure(exercise, level, width):
    hint = exercise.hints[level - 1]
    assert lost(hint.text, shown_hint(exercise, level, width)) == []


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_the_last_hint_points_to_locate(exercise):
    """The hint ladder's last rung, as `attn-kit hint` shows it, names `check FILE --locate`; no
    earlier hint does (it is the step after the hints, not one of them)."""
    last = len(exercise.hints)
    shown = " ".join(shown_hint(exercise, last, 80).split())
    assert "attn-kit check FILE --locate" in shown
    earlier = [n for n in range(1, last) if "--locate" in shown_hint(exercise, n, 80)]
    assert earlier == []


def test_near_code_is_highlighted_as_python():
    """In colour, the keywords of a hint's code block get a style of their own; its prose does not."""
    exercise = catalog.exercise("tiled-softmax")
    out = Console(width=80, file=io.StringIO(), force_terminal=True, color_system="256", no_color=False, theme=render.THEME)
    practice.hints(exercise, [SimpleNamespace(level=12, hint=exercise.hints[11])], 12, out)
    shown = out.file.getvalue()
    assert re.search(r"\x1b\[[0-9;]*m for\b|\x1b\[[0-9;]*mfor\x1b", shown)
    assert re.search(r"\x1b\[[0-9;]*mrange\x1b", shown)


def test_the_near_code_hints_do_hold_code():
    """The test above has something to check: the near-code hints parse as code blocks (the rule
    is devcheck.hint_ladder_problems'; test_content's can-fail test breaks it)."""
    near_code = [(e.id, n) for e, n in HINTS if e.hints[n - 1].step == "code"]
    with_blocks = [(e.id, n) for e, n in HINTS if parse(e.hints[n - 1].text).code]
    assert near_code and set(near_code) <= set(with_blocks)
    assert not [p for e in EXERCISES for p in check.hint_ladder_problems(e) if "near-code" in p]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_every_statement_keeps_its_code_and_structure(exercise, width):
    out = console(width)
    render_content.statement(exercise, out)
    assert lost(exercise.statement, out.file.getvalue()) == []
    assert parse(exercise.statement).headings  # and there is structure to lose


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_the_interviewer_sheet_keeps_the_statements_code(exercise, width):
    out = console(width)
    practice.interviewer_sheet(exercise, out)
    shown = out.file.getvalue()
    assert lost(exercise.statement, shown) == []
    for question in exercise.questions:
        if question.answer:
            assert lost(question.answer, shown) == [], question.id


@pytest.mark.parametrize("width", WIDTHS)
def test_every_model_answer_keeps_its_code(width):
    answers = [(e, q) for e in EXERCISES for q in e.questions if q.answer]
    assert answers
    for exercise, question in answers:
        out = console(width)
        practice.model_answer(question, out)
        assert lost(question.answer, out.file.getvalue()) == [], (exercise.id, question.id)


def test_a_review_card_shows_the_model_answer_and_its_source():
    exercise = catalog.exercise("gqa")
    question = next(q for q in exercise.questions if q.id == "mla-weight-absorption")
    out = console(80)
    practice.card_back(SimpleNamespace(exercise=exercise, question=question), out)
    shown = out.file.getvalue()
    assert "Model answer:" in shown and lost(question.answer, shown) == []
    assert "Source: DeepSeek-V2" in shown and "checked by" not in shown
    lines = shown.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  • "))
    assert lines[first + 1].startswith("    ")  # a wrapped key point keeps its indent


def test_one_line_content_holds_no_code_block():
    """Follow-ups, key points and question prompts are shown as plain wrapped text, which is right
    only while none of them holds a code block (a line of code or an indented block)."""
    texts = [
        (e.id, t)
        for e in EXERCISES
        for t in [f.prompt for f in e.followups]
        + [f.answer for f in e.followups]
        + [q.prompt for q in e.questions]
        + [p for q in e.questions for p in q.key_points]
    ]
    assert texts
    assert [(where, t[:50]) for where, t in texts if parse(t).code or "\n    " in t] == []


def shown_as(kind: str, code_line: str, width: int = 80) -> str:
    """One code line rendered the way `kind` (statement, hint, model answer) is shown."""
    text = f"Text.\n\n    {code_line}\n"
    out = console(width)
    if kind == "statement":
        render_content.statement(SimpleNamespace(statement=text), out)
    elif kind == "hint":
        hint = catalog.Hint(title="t", text=text)
        practice.hints(SimpleNamespace(id="x", hints=(hint,)), [SimpleNamespace(level=1, hint=hint)], 1, out)
    else:
        practice.model_answer(SimpleNamespace(answer=text, source=""), out)
    return out.file.getvalue()


@pytest.mark.parametrize("kind", sorted(check.CODE_WIDTH))
def test_dev_check_code_widths_are_the_renderers(kind):
    """`attn-kit dev check` allows exactly the code lines that show whole at 80 columns."""
    limit = check.CODE_WIDTH[kind]
    fits, too_long = "x = " + "1" * (limit - 4), "x = " + "1" * (limit - 3)
    assert block_shown([fits], shown_as(kind, fits).splitlines())
    assert not block_shown([too_long], shown_as(kind, too_long).splitlines())


def test_dev_check_flags_a_long_code_line():
    exercise = catalog.exercise("tiled-softmax")
    long_hint = catalog.Hint(title="t", text="    " + "y = 1  # " + "z" * 80 + "\n")
    content = check.Content.installed()
    content.__dict__["exercises"] = {exercise.id: dataclasses.replace(exercise, hints=(*exercise.hints, long_hint))}
    problems = list(check.code_fits_an_80_column_terminal(content))
    assert len(problems) == 1 and "hint 16" in problems[0].message and "76" in problems[0].message
    content.__dict__["exercises"] = {exercise.id: exercise}
    assert list(check.code_fits_an_80_column_terminal(content)) == []


def test_the_check_can_fail():
    """A reflowed code block, a lost heading and a lost bullet are all reported."""
    source = "# Title\n\n- one\n- two\n\nThen:\n\n    x = 1\n    if x:\n        y = 2\n"
    out = console(80)
    out.print(source.replace("\n    ", " "))  # everything as prose
    problems = lost(source, out.file.getvalue())
    assert any("code block" in p for p in problems) and any("list items" in p for p in problems)
    assert lost("## Gone\n", "something else\n") == ["heading lost: 'Gone'"]
    # the stripped first line is exactly the bug this file was written for
    hint = next(h for h in catalog.exercise("tiled-softmax").hints if h.step == "code")
    out = console(80)
    from rich.markdown import Markdown

    out.print(Markdown(hint.text.strip()))
    assert lost(hint.text, out.file.getvalue())


def test_hint_in_a_pseudo_terminal_at_80_columns():
    """`attn-kit hint tiled-softmax --level 12` on a real 80x24 terminal shows each code line whole."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", "hint", "tiled-softmax", "--level", "12"],
        env=dict(os.environ, NO_COLOR="1"),
        encoding="utf-8",
        dimensions=(24, 80),
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    shown = plain(child.before).replace("\r\n", "\n")
    lines = shown.splitlines()
    assert "Hint 12/15 The running quantities" in shown
    hint = catalog.exercise("tiled-softmax").hints[11]
    assert hint.step == "code" and parse(hint.text).code
    for block in parse(hint.text).code:
        assert block_shown(block, lines), shown
    start = next(i for i, line in enumerate(lines) if line.startswith("Hint 12/15"))
    assert all(len(line) <= 80 for line in lines[start:])
