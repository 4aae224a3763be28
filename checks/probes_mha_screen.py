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
    blocked_output_answer,
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
    head widths (4 and 9, or the exercise's `asker.kept["widths"]`): a catalogue scaling gives the
    same name at both (a stray factor of 2 looks like no scaling at head width 4 only)."""
    widths = asker.kept.get("widths", (8, 18))
    found = [_scale_at(asker, D, 2) for D in widths]
    return both_widths(found[0], found[1], widths[1] // 2)


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


# batch 0 blocks its first two keys (so that code which is causal whatever the mask says shows it),
# batch 1 blocks every key
KEY_PAD = np.array([[False, False, True, True], [False] * 4])


def empty_key_row(asker) -> Answer | None:
    """What a query gets when a key-padding mask allows it no key (batch 1), where batch 0's
    padded keys are blocked right: a mask whose rows are all alike, which code that masks by key
    lengths can take. Read off the weights, or off the output for a file that returns none (with
    identity projections, uniform weights give every query the mean of its batch's tokens)."""
    B, T, D, H = 2, 4, 4, 2
    x = _rng().normal(0.0, 1.0, size=(B, T, D)).round(6)
    p = _plain_params(D, biases=True)
    mask = np.broadcast_to(KEY_PAD[:, None, :], (B, T, T)).copy()
    try:
        w, plain = _attend(asker, x, p, H, mask)[1], _attend(asker, x, p, H)[1]
    except Silent:
        return _empty_key_row_output(asker, x, p, H, mask)
    if not (np.abs(w[0][..., :2]) <= 1e-12).all() or not (w[0][..., 2:] > 0).all():
        return None  # the mask itself is not applied right: another question
    return blocked_row_answer(w[1, 0, 0], plain[1, 0, 0], "the attention weights of a query whose key mask allows no key")


FAR = 3e16  # token features near this: scores near 1e33, which no fill constant of the catalogue absorbs


def empty_key_row_far_scores(asker) -> Answer | None:
    """additive-mask-leaks where the added constant swamps ordinary scores (finfo.min added in
    float32 leaves every blocked score equal, so a row with no allowed key comes back uniform, as
    a replaced fill would give it): the same key-padding mask as `empty_key_row`, on tokens whose
    scores are near 1e33, which no constant the catalogue lists (-10 … finfo.min) absorbs. A row
    with no allowed key that then comes back as the softmax of its unmasked scores shows the mask
    was added. Only that answer: uniform here is a replaced fill, `empty_key_row`'s question."""
    B, T, D, H = 2, 4, 4, 2
    x = (_rng().uniform(1.0, 2.0, size=(B, T, D)) * FAR).round(-10)
    p = _plain_params(D, biases=True)
    mask = np.broadcast_to(KEY_PAD[:, None, :], (B, T, T)).copy()
    w, plain = _attend(asker, x, p, H, mask)[1], _attend(asker, x, p, H)[1]
    if not (np.isfinite(plain).all() and np.isfinite(w[0]).all()) or not (np.abs(w[0][..., :2]) <= 1e-12).all():
        return None  # the far scores overflow, or the mask itself is not applied right: other questions
    answer = blocked_row_answer(
        w[1, 0, 0], plain[1, 0, 0], "the attention weights of a query whose key mask allows no key, at scores near 1e33,"
    )
    if answer is None or answer.bug != "additive-mask-leaks":
        return None
    return Answer(answer.bug, answer.evidence + " (at ordinary scores the added constant absorbs them, and the row looks uniform)")


def _empty_key_row_output(asker, x, p, H, mask) -> Answer | None:
    """The same question off the output: batch 0's queries 2 and 3 must not see tokens 0 and 1
    (moving those tokens leaves their outputs as they were) and must see the mask (their outputs
    differ from those without it)."""
    out, unmasked = _output(asker, x, p, H, mask), _output(asker, x, p, H)
    moved_x = x.copy()
    moved_x[0, :2] += 1.0
    if not np.allclose(_output(asker, moved_x, p, H, mask)[0, 2:], out[0, 2:], rtol=1e-9, atol=1e-12):
        return None  # the blocked keys are seen: another question
    if np.allclose(out[0, 2:], unmasked[0, 2:], rtol=1e-6, atol=1e-9):
        return None  # the mask changes nothing where it should: another question
    return blocked_output_answer(out[1], x[1].mean(axis=0), unmasked[1], "the output of every query whose key mask allows no key")


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


# the ways a [B, T, H·hd] projection becomes per-head [B, H, T, hd] vectors, and back
def _split(y: np.ndarray, H: int, how: str) -> np.ndarray:
    B, T, C = y.shape
    hd = C // H
    if how == "strided":
        return y.reshape(B, T, hd, H).transpose(0, 3, 1, 2)
    if how == "no-transpose":
        return y.reshape(B, H, T, hd)
    return y.reshape(B, T, H, hd).transpose(0, 2, 1, 3)


def _merge(o: np.ndarray, how: str) -> np.ndarray:
    B, H, T, hd = o.shape
    if how == "strided":
        return o.transpose(0, 2, 3, 1).reshape(B, T, H * hd)
    if how == "no-transpose":
        return o.reshape(B, T, H * hd)
    return o.transpose(0, 2, 1, 3).reshape(B, T, H * hd)


LAYOUTS = (("contiguous", None), ("strided", "heads-interleaved"), ("no-transpose", "reshape-without-transpose"))
SAID = {
    "heads-interleaved": "head h takes the strided columns h, h + H, h + 2H, … instead of h·hd to (h+1)·hd",
    "reshape-without-transpose": "[B, T, H·hd] is reshaped straight to [B, H, T, hd] (no transpose), mixing tokens and heads",
}
MERGED = {
    "heads-interleaved": "head h fills the strided columns h, h + H, h + 2H, … instead of h·hd to (h+1)·hd",
    "reshape-without-transpose": "[B, H, T, hd] is reshaped straight to [B, T, H·hd] (no transpose), mixing tokens and heads",
}


def _heads_layer(asker):
    """(x, weights, output) at B = 1, T = 3, D = 4, H = 2 with identity projections, asked once."""
    if "heads" not in asker.kept:
        x = _rng().normal(0.0, 1.0, size=(1, 3, 4)).round(6)
        out, w = _attend(asker, x, _plain_params(4), 2)
        asker.kept["heads"] = (x, w, out)
    return asker.kept["heads"]


def head_split(asker) -> Answer | None:
    """Which columns each head's queries and keys are read from: the returned weights must be the
    softmax of c·q_h·k_h for one split (contiguous, strided, or no transpose), whatever c is."""
    x, w, _ = _heads_layer(asker)
    fitting = []
    for how, bug in LAYOUTS:
        h = _split(x, 2, how)
        if fit_factor(w, h @ h.transpose(0, 1, 3, 2)) is not None:
            fitting.append(bug)
    if len(fitting) != 1 or fitting[0] is None:
        return None
    return Answer(fitting[0], f"your weights are those of a split where {SAID[fitting[0]]}")


def head_merge(asker) -> Answer | None:
    """How the heads' outputs are put back together: with the split right (the returned weights fit
    the contiguous split) and identity projections, the output must be one merge of the heads'
    weighted values (weights · v_h); the wrong one names the merge's own mistake."""
    x, w, out = _heads_layer(asker)
    h = _split(x, 2, "contiguous")
    if fit_factor(w, h @ h.transpose(0, 1, 3, 2)) is None:
        return None
    o = w @ h
    fitting = [bug for how, bug in LAYOUTS if np.allclose(out, _merge(o, how), rtol=1e-6, atol=1e-9)]
    if len(fitting) != 1 or fitting[0] is None:
        return None
    return Answer(fitting[0], f"your weights are right per head, but the heads' outputs are put back where {MERGED[fitting[0]]}")


def using(layer, ask, widths=(8, 18)):
    """The probe `ask`, calling the candidate's layer through `layer(asker, x, params, H, mask)`,
    with the scale read at these two model widths (two heads)."""

    def asked(asker):
        asker.kept["layer"] = layer
        asker.kept["widths"] = widths
        return ask(asker)

    return asked


def layer_probes(layer, widths=(8, 18)) -> tuple[Probe, ...]:
    """The probes of a multi-head layer with the Wq, Wk, Wv, Wo, bq, bk, bv, bo parameters and a
    B×T×S mask shared by the heads, called through `layer` (this module's, cross-attention's, GQA's,
    rope's); the scale is read at `widths` (two heads: head widths 4 and 9 unless said)."""
    return (
        Probe("layer-empty-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), using(layer, empty_row_layer)),
        Probe("layer-empty-key-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), using(layer, empty_key_row)),
        Probe("layer-far-empty-row", ("additive-mask-leaks",), using(layer, empty_key_row_far_scores), explains=("blocked-row-uniform",)),
        Probe("scale", ("no-scaling", "scale-by-model-width", "double-scaling", "scale-after-softmax"), using(layer, scale, widths)),
        Probe("biases", ("biases-ignored", "no-output-projection"), using(layer, biases)),
        Probe("mask-pattern", ("mask-ignored", "mask-inverted", "fill-value-too-weak"), using(layer, mask_pattern)),
        Probe("head-split", ("heads-interleaved", "reshape-without-transpose"), using(layer, head_split)),
        Probe("head-merge", ("heads-interleaved", "reshape-without-transpose"), using(layer, head_merge)),
    )


PROBES = (
    Probe("softmax-empty-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), empty_row_softmax),
    Probe("causal-mask", ("causal-off-by-one",), causal_mask),
    Probe("padding-mask", ("padding-masks-queries",), padding_mask),
    *layer_probes(screen_call),
)
