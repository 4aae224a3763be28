"""Long texts (a statement, a solution, the history, `check --full`) through a pager, as git does:
only when stdout is a terminal; `$PAGER` if set (empty or `cat`: no pager), else `less`; `LESS`
defaults to FRX (quit if the text fits one screen, keep colours, leave the text on the screen) and
`LV` to -c, unless the user set them. A pager that cannot be found prints the text directly."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator

from rich.console import Console
from rich.pager import Pager

DEFAULT = "less -R"
CHOP = " -S"  # added to the default pager for texts whose lines must not wrap (a solution's source)


def command(chop: bool = False) -> str | None:
    """The shell command of the pager, or None when there is none to use."""
    chosen = os.environ.get("PAGER")
    text = (DEFAULT + (CHOP if chop else "")) if chosen is None else chosen.strip()
    if not text or text == "cat":
        return None
    try:
        program = shlex.split(text)[0]
    except (ValueError, IndexError):
        return None
    return text if shutil.which(program) else None


class ShellPager(Pager):
    """rich's Pager, run as git runs one: through the shell, with git's LESS and LV defaults."""

    def __init__(self, text: str):
        self.text = text

    def show(self, content: str) -> None:
        env = dict(os.environ)
        env.setdefault("LESS", "FRX")
        env.setdefault("LV", "-c")
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the pager while it runs
        try:
            proc = subprocess.Popen(self.text, shell=True, stdin=subprocess.PIPE, env=env)
            assert proc.stdin is not None
            try:
                proc.stdin.write(content.encode("utf-8", errors="replace"))
                proc.stdin.close()
            except (BrokenPipeError, OSError):  # the reader quit before the end: the rest is not wanted
                pass
            proc.wait()
        finally:
            signal.signal(signal.SIGINT, previous)


def _on_terminal(out: Console) -> bool:
    """`out` writes to stdout and stdout is a terminal (FORCE_COLOR makes rich call a pipe a
    terminal: a pipe never gets a pager)."""
    try:
        return out.is_terminal and not out.is_dumb_terminal and os.isatty(sys.stdout.fileno()) and out.file.fileno() == sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream with no descriptor (a test's StringIO)
        return False


@contextlib.contextmanager
def paged(out: Console, chop: bool = False, when: bool = True) -> Iterator[bool]:
    """Everything `out` prints inside goes through the pager, when `when`, `out` is the terminal
    and a pager is set; yields whether it does. `chop`: the text has lines that must not wrap (the
    default pager then scrolls them sideways)."""
    text = command(chop) if when and _on_terminal(out) else None
    if text is None:
        yield False
        return
    with out.pager(ShellPager(text), styles=True):
        yield True
