"""Probes for tiled-softmax: the weights read off the output, and what a query with no allowed key
outputs.

tiled_attention returns only its output. With the values the identity matrix (dv = S) and the key
width d = S, the output *is* the attention weights, at a shape where dv = d: ports that support
only dv = d (their accumulator is shaped like q) crash on the checks' dv ≠ d cases and still answer
here. The scale factor is fitted off those weights in one block (S = d = 4 and 9); the online
rescaling is read with one key a block, against the weights each rescaling mistake gives.

The empty row: every key is blocked for every query (a mask whose rows are all alike, which code
that masks keys only can take), after a mask that allows keys 0 and 2 has been seen to block the
others (changing the blocked keys' values changes nothing). Uniform weights then give every query
the plain mean of the values.
"""

from __future__ import annotations

import numpy as np

from attn_kit.diagnosis.probes import Answer, Probe, blocked_output_answer, both_widths, fit_factor, scale_answer

T, S, d, dv = 3, 4, 4, 4  # dv = d: ports whose accumulator is shaped like q answer too
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


def _weights(asker, S: int, block_size: int, seed: int = 20261206) -> tuple[np.ndarray, np.ndarray]:
    """(the output with v = I, S×S, which is the weights; the raw scores q·k) for 3 queries, d = S."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(0.0, 1.0, size=(3, S)).round(6), rng.normal(0.0, 1.0, size=(S, S)).round(6)
    out = asker.array(asker.call("tiled_attention", q, k, np.eye(S), None, block_size=block_size), (3, S))
    return out, q @ k.T


def scale(asker) -> Answer | None:
    """The factor on q·k, fitted off the weights (one block holds every key) at d = 4 and d = 9."""
    found = []
    for S in (4, 9):
        w, raw = _weights(asker, S, 64)
        fitted = fit_factor(w, raw)
        found.append(None if fitted is None else scale_answer(fitted[0], fitted[1], S, 1))
    return both_widths(found[0], found[1], 9)


def _online(raw: np.ndarray, bug: str | None) -> np.ndarray:
    """The weights the online softmax gives with one key a block, right or with `bug`."""
    s = raw / np.sqrt(raw.shape[1])
    T, S = s.shape
    m, total, acc = np.full(T, -np.inf), np.zeros(T), np.zeros((T, S))
    for j in range(S):
        m_new = np.maximum(m, s[:, j])
        alpha = np.exp(m - m_new)
        if bug == "online-rescale-sign-flipped":
            alpha = np.where(np.isfinite(m), np.exp(m_new - m), 0.0)
        elif bug == "online-softmax-no-rescale":
            alpha = np.where(np.isfinite(m), 1.0, 0.0)
        p = np.exp(s[:, j] - m_new)
        total = total * alpha + p
        acc = acc * (1.0 if bug == "online-softmax-acc-not-rescaled" else alpha[:, None])
        acc[:, j] += p
        m = m_new
    return acc / total[:, None]


ONLINE = ("online-rescale-sign-flipped", "online-softmax-no-rescale", "online-softmax-acc-not-rescaled")


def online(asker) -> Answer | None:
    """The weights with one key a block (S = d = 6), against the right online softmax and each of
    its rescaling mistakes (random scores: each query's running max grows at some block)."""
    w, raw = _weights(asker, 6, 1, seed=7)
    if not np.isfinite(w).all():
        return None
    fitting = [bug for bug in (None, *ONLINE) if np.allclose(w, _online(raw, bug), rtol=1e-5, atol=1e-7)]
    if len(fitting) != 1 or fitting[0] is None:
        return None
    said = {
        "online-rescale-sign-flipped": "multiplied by exp(m_new - m_old), not exp(m_old - m_new)",
        "online-softmax-no-rescale": "never rescaled when the running max grows",
        "online-softmax-acc-not-rescaled": "rescaled in the running sum but not in the accumulated values",
    }[fitting[0]]
    return Answer(
        fitting[0],
        f"with the values the identity (so that your output is the weights) and one key a block, your weights are "
        f"those of an online softmax whose running totals are {said}",
    )


PROBES = (
    Probe("empty-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), empty_row),
    Probe("scale", ("no-scaling", "double-scaling", "scale-after-softmax"), scale),
    Probe("online", ONLINE, online),
)
