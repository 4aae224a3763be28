"""Probes for tiled-softmax: what a query with no allowed key outputs.

tiled_attention returns only its output, so the question is read there: every key is blocked for
every query (a mask whose rows are all alike, which code that masks keys only can take), after a
mask that allows keys 0 and 2 has been seen to block the others (changing the blocked keys' values
changes nothing). Uniform weights then give every query the plain mean of the values.
"""

from __future__ import annotations

import numpy as np

from attn_kit.diagnosis.probes import Answer, Probe, blocked_output_answer

T, S, d, dv = 3, 4, 4, 3
BLOCK = 2  # two key blocks: a per-block empty row shows too


def empty_row(asker) -> Answer | None:
    rng = np.random.default_rng(20261206)
    q, k = rng.normal(0.0, 1.0, size=(T, d)).round(6), rng.normal(0.0, 1.0, size=(S, d)).round(6)
    v = rng.normal(0.0, 1.0, size=(S, dv)).round(6)
    some = np.broadcast_to(np.array([True, False, True, False]), (T, S)).copy()
    first = asker.array(asker.call("tiled_attention", q, k, v, some, block_size=BLOCK), (T, dv))
    moved_v = v.copy()
    moved_v[[1, 3]] += 1.0
    again = asker.array(asker.call("tiled_attention", q, k, moved_v, some, block_size=BLOCK), (T, dv))
    if not np.isfinite(first).all() or not np.allclose(again, first, rtol=1e-9, atol=1e-12):
        return None  # blocked keys are not blocked: another question
    rows = asker.array(asker.call("tiled_attention", q, k, v, np.zeros((T, S), bool), block_size=BLOCK), (T, dv))
    unmasked = asker.array(asker.call("tiled_attention", q, k, v, None, block_size=BLOCK), (T, dv))
    return blocked_output_answer(rows, v.mean(axis=0), unmasked, "the output of every query with no allowed key")


PROBES = (Probe("empty-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), empty_row),)
