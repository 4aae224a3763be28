"""Our content on screen: statements, hints and model answers from prompts/ as rich Markdown, with
their code blocks highlighted. Its own module because Markdown and highlighting cost a tenth of
`check`'s start-up in imports (markdown-it, pygments), and a check report shows no content."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import CodeBlock, Markdown
from rich.syntax import Syntax
from rich.text import Text

from attn_kit.render.check import console
from attn_kit.render.pager import paged


class _Code(CodeBlock):
    """A code block of our content, highlighted as Python unless its fence names a language, in
    the colours `attn-kit solution` uses (the terminal's own background, light or dark)."""

    @classmethod
    def create(cls, markdown, token) -> CodeBlock:
        return cls((token.info or "").partition(" ")[0] or "python", "ansi_dark")

    def __rich_console__(self, console, options):
        yield Syntax(str(self.text).rstrip(), self.lexer_name, theme=self.theme, word_wrap=True, padding=1, background_color="default")


class _Content(Markdown):
    elements = {**Markdown.elements, "code_block": _Code, "fence": _Code}


def content(text: str) -> Markdown:
    """A statement, hint or model answer from prompts/ as rich Markdown. Every piece of content
    goes through here. Only the blank lines at either end are trimmed: a hint that opens with an
    indented code block keeps that indent (stripping it turned the block into one reflowed
    paragraph). prompts/ keeps code lines short enough to show whole at 80 columns."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return _Content("\n".join(lines))


def statement(exercise, out: Console | None = None, page: bool = True) -> None:
    """The statement, then the exercise's mask patterns as grids (render/grid.py), if it has any;
    through the pager on a terminal when `page` (a statement is longer than a screen); not in a
    mock, whose clock runs while the statement is read."""
    out = out or console()
    with paged(out, when=page):
        out.print(content(exercise.statement))
        if getattr(exercise, "masks", ()):  # a bare statement (a test's) has none
            from attn_kit.render import grid

            for line in grid.mask_pictures(exercise.masks, out.width):
                out.print(line)


def started(exercise, path, out: Console | None = None) -> None:
    """The statement (paged), then, on the terminal itself, the file written and the command to run."""
    out = out or console()
    statement(exercise, out)
    out.print()
    out.print(Text("Wrote the starter file ", style="muted") + Text(str(path), style="label") + Text(". Edit it, then run:", style="muted"))
    out.print(Text(f"  attn-kit check {path}", style="command"), soft_wrap=True)  # one line, to copy whole
