"""Probes for attention-backward: dv, the softmax Jacobian, dk's operand and the 1/sqrt(d) on dq
and dk, each read apart.

Every probe asks `attention_backward` at T = S and d = dv (the shapes every backward supports: a
FlashAttention port that needs dv = d, a dv that is P·dout instead of Pᵀ·dout) and reads the
gradients against forms computed here, in the kit's process, from the same inputs:
- dv with q = 0 (every score 0, so P is uniform over the keys a query sees): which keys the mask
  lets each query see (mask-inverted, mask-ignored);
- dv with a mask that lets each query see exactly one key (a cycle, not its own inverse): P is
  that permutation whatever the scale or the Jacobian, so dv must be Pᵀ·dout, and P·dout is
  dv-not-transposed;
- dq and dk without a mask, at head widths 4 and 9: each must be one of the forms the catalogue
  describes (the Jacobian's rowsum term right, missing, or rowsum(dP); dk from dZᵀ·q or dZ·q),
  times 1 or sqrt(d) (the 1/sqrt(d) missing). One form must fit both widths, dq and dk must agree
  on the Jacobian, and the probes of the Jacobian, of dk's operand and of the scale each name their
  own part of it. A forward that computes another P (its scale, its softmax) fits no form: silent.
"""

from __future__ import annotations

import numpy as np

from attn_kit.diagnosis.probes import Answer, Probe, Silent

from .cases import lists

FN = "attention_backward"
T = 4  # queries = keys: the transposition mistakes fit these shapes
WIDTHS = (4, 9)  # d = dv; two widths, so a factor of sqrt(d) is told from a stray constant
CYCLE = np.array([1, 2, 3, 0])  # query i sees only key CYCLE[i]: a permutation that is not its own inverse
RTOL = 1e-5  # float32 backward passes (a FlashAttention port's statistics are float32)


def _rng(d: int):
    return np.random.default_rng(20261206 + d)


def _inputs(d: int):
    rng = _rng(d)
    q, k, v, dout = (rng.normal(0.0, 1.0, size=(1, 2, T, d)).round(6) for _ in range(4))
    return q, k, v, dout


def _grads(asker, q, k, v, dout, mask=None) -> tuple[np.ndarray, ...]:
    value = asker.call(FN, lists(q), lists(k), lists(v), lists(dout), mask=None if mask is None else lists(mask))
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise Silent("not three gradients")
    return tuple(asker.array(g, a.shape) for g, a in zip(value, (q, k, v)))


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.isfinite(a).all() and bool(np.allclose(a, b, rtol=RTOL, atol=RTOL * max(np.abs(b).max(), 1e-12)))


def dv_transpose(asker) -> Answer | None:
    """dv with one allowed key per query: Pᵀ·dout (right), or P·dout (dv-not-transposed)."""
    d = WIDTHS[0]
    q, k, v, dout = _inputs(d)
    mask = np.zeros((1, T, T), bool)
    mask[0, np.arange(T), CYCLE] = True
    _, _, dv = _grads(asker, q, k, v, dout, mask)
    P = np.broadcast_to(mask[:, None].astype(float), (1, 2, T, T))
    right, swapped = np.swapaxes(P, -1, -2) @ dout, P @ dout
    if _close(dv, swapped) and not _close(dv, right):
        return Answer(
            "dv-not-transposed",
            "with each query allowed one key (query i sees key i + 1), your dv for key j is dout of query j + 1, "
            "not of query j - 1: P·dout, where the reference gives Pᵀ·dout",
        )
    return None


# each query keeps one to three keys and blocks at least one: read the wrong way round, or not at
# all, the keys each query sees differ
MASK = np.array([[True, False, True, False], [False, True, True, True], [True, False, False, False], [False, True, False, True]])
MASKINGS = (  # (bug, the keys each query then sees)
    (None, MASK),
    ("mask-inverted", ~MASK),
    ("mask-ignored", np.ones_like(MASK)),
)


def mask_reading(asker) -> Answer | None:
    """Which keys each query sees, read off dv with q = 0: every score is 0 whatever the scale, so
    P is uniform over the keys a query sees, and dv is Pᵀ·dout (or P·dout, dv's own mistake, which
    this question leaves aside). One reading of the mask must fit."""
    d = WIDTHS[0]
    _, k, v, dout = _inputs(d)
    q = np.zeros_like(k)
    _, _, dv = _grads(asker, q, k, v, dout, MASK[None])
    fits = []
    for bug, seen in MASKINGS:
        P = np.broadcast_to((seen / seen.sum(axis=-1, keepdims=True))[None, None], (1, 2, T, T))
        if _close(dv, np.swapaxes(P, -1, -2) @ dout) or _close(dv, P @ dout):
            fits.append(bug)
    if len(fits) != 1 or fits[0] is None:
        return None
    said = {"mask-inverted": "the keys the mask blocks, and none it allows", "mask-ignored": "every key, whatever the mask says"}[fits[0]]
    return Answer(fits[0], f"with every score 0 (q = 0), your dv is that of queries that each see {said}")


JACOBIANS = (  # (bug, dZ from P and dP)
    (None, lambda P, dP: P * (dP - (P * dP).sum(axis=-1, keepdims=True))),
    ("softmax-jacobian-diagonal", lambda P, dP: P * dP),
    ("backward-rowsum-wrong", lambda P, dP: P * (dP - dP.sum(axis=-1, keepdims=True))),
)
OPERANDS = ((None, lambda dZ, q: np.swapaxes(dZ, -1, -2) @ q), ("dk-from-wrong-operand", lambda dZ, q: dZ @ q))


def _fits(d: int, dq: np.ndarray, dk: np.ndarray, q, k, v, dout) -> set[tuple]:
    """Every (Jacobian bug, dq's factor, dk's operand bug, dk's factor) whose forms give these dq
    and dk; factors are 1 and sqrt(d) (the 1/sqrt(d) left out)."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    P = e / e.sum(axis=-1, keepdims=True)
    dP = dout @ np.swapaxes(v, -1, -2)
    found = set()
    for jac, dz in JACOBIANS:
        dZ = dz(P, dP)
        for cq in (1.0, np.sqrt(d)):
            if not _close(dq, dZ @ k * cq / np.sqrt(d)):
                continue
            for operand, dk_of in OPERANDS:
                for ck in (1.0, np.sqrt(d)):
                    if _close(dk, dk_of(dZ, q) * ck / np.sqrt(d)):
                        found.add((jac, cq != 1.0, operand, ck != 1.0))
    return found


def _reading(asker) -> tuple | None:
    """The one (Jacobian bug, dq unscaled, dk's operand bug, dk unscaled) that fits at both head
    widths, asked once and shared by the probes below; None when no single one does."""
    if "backward" not in asker.kept:
        fits = None
        for d in WIDTHS:
            q, k, v, dout = _inputs(d)
            dq, dk, _ = _grads(asker, q, k, v, dout)
            here = _fits(d, dq, dk, q, k, v, dout)
            fits = here if fits is None else fits & here
        asker.kept["backward"] = fits.pop() if fits is not None and len(fits) == 1 else None
    return asker.kept["backward"]


def jacobian(asker) -> Answer | None:
    reading = _reading(asker)
    if reading is None or reading[0] is None:
        return None
    said = {
        "softmax-jacobian-diagonal": "dZ = P ⊙ dP: the − P·rowsum(P ⊙ dP) term of the softmax Jacobian is missing",
        "backward-rowsum-wrong": "dZ = P ⊙ (dP − rowsum(dP)): the row sum is of dP, not of P ⊙ dP",
    }[reading[0]]
    return Answer(reading[0], f"your dq and dk, at head widths {WIDTHS[0]} and {WIDTHS[1]}, are those of {said}")


def dk_operand(asker) -> Answer | None:
    reading = _reading(asker)
    if reading is None or reading[2] is None:
        return None
    return Answer("dk-from-wrong-operand", "your dk is dZ·q, where the reference's is dZᵀ·q (at T = S both fit the shapes)")


def missing_scale(asker) -> Answer | None:
    reading = _reading(asker)
    if reading is None or not (reading[1] or reading[3]):
        return None
    which = " and ".join(name for name, off in (("dq", reading[1]), ("dk", reading[3])) if off)
    return Answer(
        "backward-missing-scale",
        f"your {which} {'is' if ' and ' not in which else 'are'} sqrt(d) times the reference's at head widths "
        f"{WIDTHS[0]} and {WIDTHS[1]}: not multiplied by 1/sqrt(d) (∂(q·k/sqrt(d))/∂q = k/sqrt(d))",
    )


PROBES = (
    Probe("dv-transpose", ("dv-not-transposed",), dv_transpose),
    Probe("mask", ("mask-inverted", "mask-ignored"), mask_reading),
    Probe("jacobian", ("softmax-jacobian-diagonal", "backward-rowsum-wrong"), jacobian),
    Probe("dk-operand", ("dk-from-wrong-operand",), dk_operand),
    Probe("backward-scale", ("backward-missing-scale",), missing_scale),
)
