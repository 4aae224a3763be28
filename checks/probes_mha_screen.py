"""Probes for mha-screen: narrow questions put to the candidate's functions when a check failed.

Each probe's inputs make the catalogue's other mistakes irrelevant to its question, and each
reads a pattern only its bugs make; otherwise it stays silent (kit/diagnosis/probes.py explains
how the answers meet the composed search). Inputs go as nested lists, as the checks send them.
"""

from __future__ import annotations

import numpy as np

from attn_kit.diagnosis.probes import (
    Answer,
    Probe,
    Silent,
    blocked_row_answer,
    both_widths,
    fit_factor,
    projection_answer,
    same,
    scale_answer,
)

from .cases import lists

FN = "multi_head_attention"
# each row keeps a prefix of the keys (code that masks by lengths can take it), and rows 0, 1 and 3
# block two keys or more, so a constant fill shows as equal blocked weights
MASK = np.array([[True, False, False, False], [True, True, False, False], [True, True, True, False], [True, True, False, False]])


def _rng():
    return np.random.default_rng(20261206)


def screen_call(asker, x, p, H, mask, weights=True):
    """multi_head_attention(x, params, H, mask=..., return_weights=weights), inputs as lists."""
    return asker.call(FN, lists(x), lists(p), H, mask=lists(mask), return_weights=weights)


def _attend(asker, x, p, H, mask=None):
    """(output B×T×D, weights B×H×T×T) from the candidate's layer (`asker.kept["layer"]`, this
    exercise's way to call it: self-attention, every head its own keys), as float64 arrays."""
    B, T, D = x.shape
    value = asker.kept.get("layer", screen_call)(asker, x, p, H, mask)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise Silent("no weights")
    return asker.array(value[0], (B, T, D)), asker.array(value[1], (B, H, T, T))


def _output(asker, x, p, H, mask=None) -> np.ndarray:
    """The output alone (return_weights=False): what a file built on scaled_dot_product_attention,
    which has no weights to return, still answers."""
    B, T, D = x.shape
    return asker.array(asker.kept.get("layer", screen_call)(asker, x, p, H, mask, weights=False), (B, T, D))


def _plain_params(D: int, rng=None, biases: bool = False) -> dict:
    """Identity projections (scores are the raw dot products of the tokens' head slices)."""
    p: dict[str, np.ndarray] = {f"W{n}": np.eye(D) for n in "qkvo"}
    if biases:
        p.update({f"b{n}": np.zeros(D) for n in "qkvo"})
    return p


def scale(asker) -> Answer | None:
    """The factor on q·k, fitted off the returned weights (identity projections, no mask), at two
    head widths: a catalogue scaling gives the same name at both (a stray factor of 2 looks like
    no scaling at head width 4 only)."""
    found = [_scale_at(asker, D, 2) for D in (8, 18)]
    return both_widths(found[0], found[1], 9)


def _scale_at(asker, D: int, H: int) -> Answer | None:
    B, T = 1, 4
    hd = D // H
    x = _rng().normal(0.0, 0.9, size=(B, T, D)).round(6)
    _, w = _attend(asker, x, _plain_params(D, biases=True), H)
    heads = x.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
    raw = heads @ heads.transpose(0, 1, 3, 2)
    fitted = fit_factor(w, raw)
    return None if fitted is None else scale_answer(fitted[0], fitted[1], hd, H)


def biases(asker) -> Answer | None:
    """Whether bq, bv, bo and Wo reach the output: each changed alone, the output must move."""
    rng = _rng()
    B, T, D, H = 1, 3, 4, 2
    x = rng.normal(0.0, 1.0, size=(B, T, D)).round(6)
    p = {f"W{n}": rng.normal(0.0, 0.5, size=(D, D)).round(6) for n in "qkvo"}
    p.update({f"b{n}": rng.normal(0.0, 0.5, size=D).round(6) for n in "qkvo"})
    base = _output(asker, x, p, H)

    def unmoved(name: str, change) -> bool:
        out = _output(asker, x, dict(p, **{name: p[name] + change}), H)
        return same(out, base)

    return projection_answer(unmoved, (("bq", "Wq"), ("bv", "Wv"), ("bo", "Wo")), rng.normal(0.0, 0.5, size=(D, D)).round(6))


def _masked(asker, mask):
    """(weights with the mask, weights without it, the mask B×T×T) on random tokens."""
    B, T, D, H = 1, 4, 4, 2
    x = _rng().normal(0.0, 1.0, size=(B, T, D)).round(6)
    p = _plain_params(D)
    _, plain = _attend(asker, x, p, H)
    _, w = _attend(asker, x, p, H, mask[None])
    return w, plain, np.broadcast_to(mask[None, None], w.shape)


def mask_pattern(asker) -> Answer | None:
    """Which keys each query sees, read off the zeros of the weights under a partial mask; for a
    file that returns no weights, only whether the mask changes the output at all."""
    try:
        w, plain, allowed = _masked(asker, MASK)
    except Silent:
        B, T, D, H = 1, 4, 4, 2
        x = _rng().normal(0.0, 1.0, size=(B, T, D)).round(6)
        if same(_output(asker, x, _plain_params(D), H, MASK[None]), _output(asker, x, _plain_params(D), H)):
            return Answer("mask-ignored", "with the mask and without it your output is the same (the reference's output moves)")
        return None
    return mask_answer(w, plain, allowed, "the mask")


def mask_answer(w: np.ndarray, plain: np.ndarray, allowed: np.ndarray, what: str) -> Answer | None:
    """mask-ignored, mask-inverted or fill-value-too-weak from the weights under a mask that leaves
    every row an allowed and a blocked key (`plain`: the same call without the mask); None when
    the blocked keys get zero weight, or for any other pattern."""
    if not (np.isfinite(w).all() and np.isfinite(plain).all()):
        return None
    zero = np.abs(w) <= 1e-12
    if (zero == ~allowed).all():
        return None
    if np.allclose(w, plain, rtol=1e-12, atol=1e-15):
        return Answer("mask-ignored", f"with {what} and without it your weights are the same: blocked keys keep their weight")
    if (zero == allowed).all():
        return Answer("mask-inverted", f"under {what}, your weights are zero exactly on the allowed keys and positive on the blocked ones")
    if zero.any() or not _constant_fill(w, plain, allowed):
        return None
    return Answer(
        "fill-value-too-weak",
        f"under {what}, the blocked keys of each row keep one and the same positive weight: "
        "their scores were replaced by a constant that does not block them",
    )


def _constant_fill(w: np.ndarray, plain: np.ndarray, allowed: np.ndarray) -> bool:
    """Every row with two blocked keys gives them one weight, where without the mask they differ."""
    rows = 0
    for wr, pr, ar in zip(w.reshape(-1, w.shape[-1]), plain.reshape(-1, w.shape[-1]), allowed.reshape(-1, w.shape[-1])):
        blocked = np.flatnonzero(~ar)
        if len(blocked) < 2:
            continue
        if np.ptp(wr[blocked]) > 1e-9 * wr[blocked].max() or np.ptp(pr[blocked]) < 1e-3 * pr[blocked].max():
            return False
        rows += 1
    return rows > 0


def empty_row_layer(asker) -> Answer | None:
    """What multi_head_attention gives a query whose every key is blocked, when its other rows
    are masked right."""
    mask = MASK.copy()
    mask[1] = False
    w, plain, allowed = _masked(asker, mask)
    alive = allowed.any(axis=-1)
    if not (np.abs(w[~allowed & alive[..., None]]) <= 1e-12).all() or not (w[alive] > 0).sum():
        return None  # the mask itself is not applied right: another question
    return blocked_row_answer(w[0, 0, 1], plain[0, 0, 1], "the attention weights of a query whose every key is masked")


def empty_row_softmax(asker) -> Answer | None:
    """What stable_softmax gives a vector whose every entry is blocked, when it blocks a key of a
    vector that keeps one."""
    scores = [0.5, 2.0, -1.0]
    partial = asker.array(asker.call("stable_softmax", scores, allowed=[True, False, True]), (3,))
    kept = np.exp(np.array([0.5, -1.0]) - 0.5)
    if not np.allclose(partial, [kept[0] / kept.sum(), 0.0, kept[1] / kept.sum()], rtol=1e-6, atol=1e-12):
        return None  # blocking itself is wrong: another question
    got = asker.array(asker.call("stable_softmax", scores, allowed=[False, False, False]), (3,))
    raw = np.exp(np.array(scores) - max(scores))
    return blocked_row_answer(got, raw / raw.sum(), "stable_softmax([0.5, 2.0, -1.0]) with every entry blocked")


def causal_mask(asker) -> Answer | None:
    """causal_mask(1, 4) against the lower triangle with the diagonal."""
    got = asker.array(asker.call("causal_mask", 1, 4), (1, 4, 4)) != 0
    if (got[0] == np.tril(np.ones((4, 4), bool), -1)).all():
        return Answer("causal-off-by-one", "causal_mask(1, 4) blocks each query's own position (the diagonal)")
    if (got[0] == np.tril(np.ones((4, 4), bool), 1)).all():
        return Answer("causal-off-by-one", "causal_mask(1, 4) lets each query see one key in its future")
    return None


def padding_mask(asker) -> Answer | None:
    """padding_mask([2, 3], 4): which axis the lengths block."""
    got = asker.array(asker.call("padding_mask", [2, 3], 4), (2, 4, 4)) != 0
    n = np.array([2, 3])[:, None, None]
    i, j = np.arange(4)[None, :, None], np.arange(4)[None, None, :]
    if (got == np.broadcast_to(i < n, got.shape)).all():
        return Answer("padding-masks-queries", "padding_mask([2, 3], 4) blocks the query rows past each length, not the key columns")
    if (got == ((i < n) & (j < n))).all():
        return Answer("padding-masks-queries", "padding_mask([2, 3], 4) blocks the query rows past each length as well as the key columns")
    return None


def using(layer, ask):
    """The probe `ask`, calling the candidate's layer through `layer(asker, x, params, H, mask)`."""

    def asked(asker):
        asker.kept["layer"] = layer
        return ask(asker)

    return asked


def layer_probes(layer) -> tuple[Probe, ...]:
    """The probes of a multi-head layer with the Wq, Wk, Wv, Wo, bq, bk, bv, bo parameters and a
    B×T×S mask shared by the heads, called through `layer` (this module's, cross-attention's, GQA's)."""
    return (
        Probe("layer-empty-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), using(layer, empty_row_layer)),
        Probe("scale", ("no-scaling", "scale-by-model-width", "double-scaling", "scale-after-softmax"), using(layer, scale)),
        Probe("biases", ("biases-ignored", "no-output-projection"), using(layer, biases)),
        Probe("mask-pattern", ("mask-ignored", "mask-inverted", "fill-value-too-weak"), using(layer, mask_pattern)),
    )


PROBES = (
    Probe("softmax-empty-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), empty_row_softmax),
    Probe("causal-mask", ("causal-off-by-one",), causal_mask),
    Probe("padding-mask", ("padding-masks-queries",), padding_mask),
    *layer_probes(screen_call),
)
