"""Probes for mha-masked-bias: narrow questions put to `multihead_attention` when a check failed.

Inputs are sent as the checks send them (tensors to a file that imports torch, float64 arrays
otherwise). Each probe's inputs keep the other mistakes of the catalogue out of its question;
kit/diagnosis/probes.py explains how the answers meet the composed search.
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

from .mha_masked_bias import FN, Case, send
from .probes_mha_screen import mask_answer

B, Q, K, H, D = 1, 4, 4, 2, 4  # Q = K: a key mask put on the query axis broadcasts and shows


def _rng():
    return np.random.default_rng(20261206)


def _case(masks=None, biases: bool = False, rng=None, D: int = D, **overrides) -> Case:
    """Random tokens, identity projections of width C = H·D (scores are the raw dot products of the
    tokens' head slices), w_o random; no biases unless asked."""
    rng = rng or _rng()
    C = H * D
    acts = {"query": rng.normal(0.0, 0.9, size=(B, Q, C)).round(6), "context": rng.normal(0.0, 0.9, size=(B, K, C)).round(6)}
    params = {"w_q": np.eye(C), "w_k": np.eye(C), "w_v": np.eye(C), "w_o": rng.normal(0.0, 0.5, size=(C, C)).round(6)}
    if biases:
        params.update({n: rng.normal(0.0, 0.5, size=C).round(6) for n in ("b_q", "b_k", "b_v")}, b_o=rng.normal(1.0, 0.5, size=C).round(6))
    params.update(overrides)
    return Case(acts, params, dict(masks or {}), H)


def _attend(asker, case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(output B×Q×Cout, attention B×H×Q×K) from the candidate, float64; Silent without attention."""
    value = asker.call(FN, *send(asker, case), **case.kwargs)
    if not isinstance(value, (tuple, list)) or len(value) != 2 or value[1] is None:
        raise Silent("no attention returned")
    out_shape, att_shape = case.shapes()
    return asker.array(value[0], out_shape), asker.array(value[1], att_shape)


def _output(asker, case: Case) -> np.ndarray:
    """The output alone, B×Q×Cout, float64: what a file that returns no attention still answers."""
    value = asker.call(FN, *send(asker, case), **case.kwargs)
    if not isinstance(value, (tuple, list)) or not value:
        raise Silent("no output")
    return asker.array(value[0], case.shapes()[0])


def _plain(asker) -> np.ndarray:
    """The attention on `_case()` without any mask, asked once for every probe."""
    if "plain" not in asker.kept:
        asker.kept["plain"] = _attend(asker, _case())[1]
    return asker.kept["plain"]


def _raw_scores(case: Case, D: int) -> np.ndarray:
    q = case.activations["query"].reshape(B, Q, H, D).transpose(0, 2, 1, 3)
    k = case.activations["context"].reshape(B, K, H, D).transpose(0, 2, 1, 3)
    return q @ k.transpose(0, 1, 3, 2)


def scale(asker) -> Answer | None:
    """The factor on q·k, fitted off the returned attention (identity projections, no mask), at
    head widths 4 and 9: a catalogue scaling gives the same name at both."""
    found = []
    for width in (D, 9):
        case = _case(D=width)
        att = _plain(asker) if width == D else _attend(asker, case)[1]
        fitted = fit_factor(att, _raw_scores(case, width))
        found.append(None if fitted is None else scale_answer(fitted[0], fitted[1], width, H))
    return both_widths(found[0], found[1], 9)


def biases(asker) -> Answer | None:
    """Whether b_q, b_v, b_o and w_o reach the output: each changed alone, the output must move."""
    rng = _rng()
    case = _case(biases=True, rng=rng)
    base, _ = _attend(asker, case)

    def unmoved(name: str, change) -> bool:
        out, _ = _attend(asker, _case(biases=True, rng=_rng(), **{name: case.parameters[name] + change}))
        return same(out, base)

    return projection_answer(
        unmoved, (("b_q", "w_q"), ("b_v", "w_v"), ("b_o", "w_o")), rng.normal(0.0, 0.5, size=case.parameters["w_o"].shape).round(6)
    )


ATTENTION_MASK = np.array([[True, False, True, False], [False, True, False, False], [True, True, False, False], [False, False, True, True]])
KEY_MASK = np.array([[True, False, True, False]])


def attention_mask(asker) -> Answer | None:
    """Which keys each query sees under attention_mask alone, off the zeros of the attention."""
    mask = np.broadcast_to(ATTENTION_MASK, (B, H, Q, K)).copy()
    plain = _plain(asker)
    _, att = _attend(asker, _case({"attention_mask": mask}))
    return mask_answer(att, plain, mask, "attention_mask")


def key_mask(asker) -> Answer | None:
    """Which keys each query sees under key_mask alone: blocked keys' columns, or query rows."""
    plain = _plain(asker)
    _, att = _attend(asker, _case({"key_mask": KEY_MASK}))
    zero = np.abs(att) <= 1e-12
    on_queries = np.broadcast_to(~KEY_MASK[:, None, :, None], att.shape)
    if (zero == on_queries).all():
        return Answer(
            "key-mask-on-query-axis", "under key_mask alone, your attention zeroes the query rows the mask blocks, not the key columns"
        )
    allowed = np.broadcast_to(KEY_MASK[:, None, None, :], att.shape)
    return mask_answer(att, plain, allowed, "key_mask")


def empty_head_row(asker) -> Answer | None:
    """What the attention gives a (query, head) row whose every key is blocked, when the other
    rows are masked right."""
    mask = np.broadcast_to(ATTENTION_MASK, (B, H, Q, K)).copy()
    mask[0, :, 1] = False  # in every head: a layer that takes one mask for all heads can take it
    plain = _plain(asker)
    _, att = _attend(asker, _case({"attention_mask": mask}))
    alive = np.asarray(mask.any(axis=-1))
    if not (np.abs(att[~mask & alive[..., None]]) <= 1e-12).all():
        return None  # the mask itself is not applied right: another question
    return blocked_row_answer(att[0, 0, 1], plain[0, 0, 1], "the attention of head 0 for query 1, whose every key is masked in every head,")


def empty_key_mask_row(asker) -> Answer | None:
    """The same question through key_mask alone, for layers that take only a key mask: batch 1
    allows no key, batch 0 allows keys 0 and 2 (its blocked keys must get zero weight)."""
    rng = _rng()
    C = H * D
    acts = {"query": rng.normal(0.0, 0.9, size=(2, Q, C)).round(6), "context": rng.normal(0.0, 0.9, size=(2, K, C)).round(6)}
    params = {"w_q": np.eye(C), "w_k": np.eye(C), "w_v": np.eye(C), "w_o": np.eye(C)}
    keys = np.array([KEY_MASK[0], np.zeros(K, bool)])
    case = Case(acts, params, {"key_mask": keys}, H)
    _, att = _attend(asker, case)
    _, plain = _attend(asker, Case(acts, params, {}, H))
    if not (np.abs(att[0][..., ~keys[0]]) <= 1e-12).all() or not (att[0][..., keys[0]] > 0).all():
        return None  # the key mask itself is not applied right: another question
    return blocked_row_answer(att[1, 0, 0], plain[1, 0, 0], "the attention of a query whose key_mask allows no key,")


def dead_query(asker) -> Answer | None:
    """What a query blocked by query_mask outputs: the reference gives zeros; b-o-not-suppressed
    gives b_o, with the query's attention rows all zero."""
    case = _case({"query_mask": np.array([[True, False, True, True]])}, biases=True)
    out, att = _attend(asker, case)
    b_o = case.parameters["b_o"]
    if not (np.abs(att[0, :, 1]) <= 1e-12).all() or not np.allclose(out[0, 1], b_o, rtol=1e-6, atol=1e-9):
        return None
    return Answer("b-o-not-suppressed", "a query blocked by query_mask has zero attention in every head, yet its output is b_o, not zeros")


CAUSAL_CASES = ((4, 4, 0), (2, 5, 1))  # (Q, K, causal_offset)
CAUSAL_RULES = (  # (bug, what the file lets query i see, as a rule on j) for query i, key j
    (None, "j <= i + offset", lambda i, j, Q, K, o: j <= i + o),
    ("causal-off-by-one", "j < i + offset", lambda i, j, Q, K, o: j < i + o),
    ("causal-off-by-one", "j <= i + offset + 1", lambda i, j, Q, K, o: j <= i + o + 1),
    ("causal-offset-ignored", "j <= i, whatever the offset", lambda i, j, Q, K, o: j <= i),
    ("causal-offset-ignored", "j <= i - offset", lambda i, j, Q, K, o: j <= i - o),
    ("causal-alignment-wrong", "j <= i + (K - Q) + offset", lambda i, j, Q, K, o: j <= i + (K - Q) + o),
    ("mask-ignored", "every key (causal=True changes nothing)", lambda i, j, Q, K, o: np.ones_like(i + j, bool)),
)


def _causal_seen(asker, Qc: int, Kc: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(which keys keep weight, which rows are readable) under causal=True alone, asked once per
    shape; Silent when every key kept weight but the weights differ from those without causal
    (blocked keys keep some weight: a fill that does not block, another question)."""
    key = ("causal", Qc, Kc, offset)
    if key not in asker.kept:
        rng = _rng()
        acts = {"query": rng.normal(0.0, 0.9, size=(1, Qc, H * D)).round(6), "context": rng.normal(0.0, 0.9, size=(1, Kc, H * D)).round(6)}
        params = {"w_q": np.eye(H * D), "w_k": np.eye(H * D), "w_v": np.eye(H * D), "w_o": np.eye(H * D)}
        _, att = _attend(asker, Case(acts, params, {}, H, causal=True, causal_offset=offset))
        seen = np.abs(att) > 1e-12
        blocks = not seen.all() or np.allclose(att, _attend(asker, Case(acts, params, {}, H))[1], rtol=1e-12, atol=1e-15)
        readable = np.isfinite(att).all(axis=-1) & ~np.isclose(att, 1.0 / Kc, rtol=1e-9, atol=0).all(axis=-1)
        asker.kept[key] = (seen, readable) if blocks else None
    found: tuple[np.ndarray, np.ndarray] | None = asker.kept[key]
    if found is None:
        raise Silent("blocked keys keep some weight")
    return found


def _rules_fitting(asker, Qc: int, Kc: int, offset: int) -> set[int]:
    """The CAUSAL_RULES that fit every readable row (rows made NaN or uniform are left out)."""
    seen, readable = _causal_seen(asker, Qc, Kc, offset)
    i, j = np.arange(Qc)[:, None], np.arange(Kc)[None, :]
    return {
        n
        for n, (_, _, rule) in enumerate(CAUSAL_RULES)
        if (seen == np.broadcast_to(rule(i, j, Qc, Kc, offset), seen.shape))[readable].all()
    }


def causal(asker) -> Answer | None:
    """Which keys each query sees under causal=True alone, read off the zeros of the attention at
    Q = K = 4 (offset 0) and Q = 2, K = 5 (offset 1). Rows the file makes NaN or uniform (an empty
    row, as another mistake may give it) are left out; one rule must fit every other row."""
    fits = set(range(len(CAUSAL_RULES)))
    for Qc, Kc, offset in CAUSAL_CASES:
        fits &= _rules_fitting(asker, Qc, Kc, offset)
    if len(fits) != 1:
        return None
    bug, rule, _ = CAUSAL_RULES[fits.pop()]
    if bug is None:
        return None
    return Answer(
        bug, f"with causal=True and no mask, query i of your attention sees the keys j with {rule} (the reference: j <= i + offset)"
    )


def _causal_part(asker, Qc: int, Kc: int, offset: int, bug: str) -> Answer | None:
    """One of two mistakes of the causal bound read apart, for code that makes both (the rule
    j <= i + (K - Q) fits neither `causal`'s single rules): at Q = K and offset 0 the bound must be
    the reference's, and at (Qc, Kc, offset) it must be `bug`'s and no other rule's."""
    base = _rules_fitting(asker, 4, 4, 0)
    if base != {0, 3, 4, 5}:  # the rules that agree with the reference at Q = K, offset 0
        return None
    fits = _rules_fitting(asker, Qc, Kc, offset) & base  # an off-by-one fits no more
    wanted = {n for n, (b, _, _) in enumerate(CAUSAL_RULES) if b == bug}
    if not fits or not fits <= wanted:
        return None
    _, rule, _ = CAUSAL_RULES[min(fits)]
    return Answer(
        bug,
        f"with causal=True, Q = {Qc}, K = {Kc} and causal_offset {offset}, query i of your attention sees the keys j with {rule} "
        "(the reference: j <= i + offset)",
    )


def causal_offset(asker) -> Answer | None:
    """causal_offset read alone: Q = K = 4 with offset 1."""
    return _causal_part(asker, 4, 4, 1, "causal-offset-ignored")


def causal_alignment(asker) -> Answer | None:
    """The corner the causal bound is anchored at, read alone: Q = 2, K = 5 with offset 0."""
    return _causal_part(asker, 2, 5, 0, "causal-alignment-wrong")


def additive_bias(asker) -> Answer | None:
    """How the additive bias enters the scores: with w_q = 0 every q·k is 0, so the attention is
    softmax(c · bias); c is fitted off the returned attention at head widths 4 and 9 (1: right;
    1/sqrt(D) at both: divided with the scores; 0: never added, if the bias then moves no output
    where q·k is not 0 either). A file that returns no attention answers only whether the bias
    moves its output at all."""
    found = []
    for width in (D, 9):
        C = H * width
        bias = _rng().normal(0.0, 1.5, size=(B, H, Q, K)).round(6)
        case = _case(D=width, w_q=np.zeros((C, C)))
        case.activations["bias"] = bias
        try:
            _, att = _attend(asker, case)
        except Silent:
            return _bias_moves_output(asker) if width == D else None
        fitted = fit_factor(att, bias)
        if fitted is None or abs(fitted[1] - 1.0) > 1e-6:
            return None  # the weights are no softmax of a multiple of the bias: another question
        found.append(_bias_factor(fitted[0], width))
    if found[0] is not None and "never added" in found[0].evidence and _bias_moves_output(asker) is None:
        return None  # with q·k = 0 a bias that multiplies the scores is invisible too: it must change nothing elsewhere
    return both_widths(found[0], found[1], 9)


def _bias_factor(c: float, width: int) -> Answer | None:
    said = f"with every q·k equal to 0, your attention is softmax(c · bias) with c = {c:.4g}"
    if abs(c) <= 1e-9:
        return Answer("bias-scaled", f"{said}: the bias is never added to the scores")
    if abs(c - 1.0 / np.sqrt(width)) <= 2e-3 / np.sqrt(width):
        return Answer("bias-scaled", f"{said} = 1/sqrt({width}): the bias was divided by sqrt(D) together with q·k")
    return None


def _bias_moves_output(asker) -> Answer | None:
    """For a file that returns no attention: the output with a bias and without it."""
    case = _case()
    base = _output(asker, case)
    case.activations["bias"] = _rng().normal(0.0, 1.5, size=(B, H, Q, K)).round(6)
    out = _output(asker, case)
    if not np.isfinite(base).all() or not same(out, base):
        return None
    return Answer("bias-scaled", "with an additive bias and without it your output is the same: the bias is never added")


PROBES = (
    Probe("additive-bias", ("bias-scaled",), additive_bias),
    Probe("scale", ("no-scaling", "scale-by-model-width", "double-scaling", "scale-after-softmax"), scale),
    Probe("biases", ("biases-ignored", "no-output-projection"), biases),
    Probe("attention-mask", ("mask-ignored", "mask-inverted", "fill-value-too-weak"), attention_mask),
    Probe("key-mask", ("key-mask-on-query-axis", "mask-ignored", "mask-inverted", "fill-value-too-weak"), key_mask),
    Probe("empty-head-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), empty_head_row),
    Probe("empty-key-mask-row", ("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), empty_key_mask_row),
    Probe("dead-query", ("b-o-not-suppressed",), dead_query),
    Probe("causal", ("causal-off-by-one", "causal-offset-ignored", "causal-alignment-wrong", "mask-ignored"), causal),
    Probe("causal-offset", ("causal-offset-ignored",), causal_offset),
    Probe("causal-alignment", ("causal-alignment-wrong",), causal_alignment),
)
