"""Probes for sliding-window: which keys each query sees, read off the output.

sliding_window_attention returns only its output. With the values the identity matrix (dv = T)
and the key width d = T, the output *is* the attention weights, at a shape where dv = d: the keys
a query sees are the nonzero entries of its row. The band is read against the rules the catalogue
describes (window + 1 or window - 1 keys, the query itself left out, a symmetric band); rows the
file leaves all zero or NaN are left out, and one rule must fit every other row, at two windows.
"""

from __future__ import annotations

import numpy as np

from attn_kit.diagnosis.probes import Answer, Probe

T = 6
RULES = (  # (bug, what query i sees, as a rule on key j for window W)
    (None, "i - W < j <= i", lambda i, j, W: (j <= i) & (j > i - W)),
    ("window-off-by-one", "i - W <= j <= i (W + 1 keys)", lambda i, j, W: (j <= i) & (j >= i - W)),
    ("window-off-by-one", "i - W + 1 < j <= i (W - 1 keys)", lambda i, j, W: (j <= i) & (j > i - W + 1)),
    ("window-excludes-self", "i - W < j < i (not itself)", lambda i, j, W: (j < i) & (j > i - W)),
    ("window-not-causal", "|i - j| < W (keys after it too)", lambda i, j, W: np.abs(i - j) < W),
)


def _seen(asker, window: int) -> tuple[np.ndarray, np.ndarray]:
    """(which keys keep weight, which rows are readable) for one batch and head, d = dv = T."""
    rng = np.random.default_rng(20261206)
    q, k = rng.normal(0.0, 1.0, size=(1, 1, T, T)).round(6), rng.normal(0.0, 1.0, size=(1, 1, T, T)).round(6)
    v = np.eye(T)[None, None]
    w = asker.array(asker.call("sliding_window_attention", q, k, v, window), (1, 1, T, T))[0, 0]
    readable = np.isfinite(w).all(axis=-1) & (np.abs(w) > 1e-12).any(axis=-1)
    return np.abs(w) > 1e-12, readable


def band(asker) -> Answer | None:
    fits = set(range(len(RULES)))
    for window in (2, 3):
        seen, readable = _seen(asker, window)
        if readable.sum() < T - 1:
            return None
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        fits &= {n for n, (_, _, rule) in enumerate(RULES) if (seen == rule(i, j, window))[readable].all()}
    if len(fits) != 1:
        return None
    bug, said, _ = RULES[fits.pop()]
    if bug is None:
        return None
    return Answer(bug, f"with the values the identity (so that your output is the weights), query i sees the keys j with {said}")


PROBES = (Probe("band", ("window-off-by-one", "window-excludes-self", "window-not-causal"), band),)
