"""Verdicts several suites share: the ValueError for widths that heads do not divide, and
inputs that must come back untouched."""

from __future__ import annotations

import re


def expect_divisibility_error(ctx, fn: str, args_for, D: int = 6, heads=(4, 0)) -> None:
    """fn(*args_for(h)) must raise ValueError mentioning divisibility for each bad head count h."""
    for h in heads:
        ctx.describe(D=D, num_heads=h)
        outcome = ctx.outcome(fn, *args_for(h))
        if outcome.status == "raised" and outcome.error.type == "ValueError":
            if not re.search(r"divis|divid", outcome.error.message, re.IGNORECASE):
                ctx.fail(f"num_heads={h} with D={D} raised ValueError, but its message "
                         f"({outcome.error.message!r}) should say that D must be divisible by num_heads")
            continue
        what = outcome.describe_failure() if not outcome.ok else "returned normally"
        ctx.fail(f"num_heads={h} with D={D} should raise ValueError; the call {what}")


def expect_untouched(ctx, fn: str, outcome, kind: str) -> None:
    """Fail when the call wrote into any of its arguments (`kind`: 'lists' or 'NumPy arrays')."""
    if outcome.mutated:
        ctx.fail(f"`{fn}` changed its argument(s) {', '.join(outcome.mutated)} (given {kind}); "
                 "copy before writing, or build new values")
