"""The thin topics of issue 37: every figure of the 32 new discussion questions, recomputed.

Speculative decoding, prefix caching, FlexAttention, disaggregated prefill and decode,
FlashAttention-4 and FP4, ALiBi / sink logits / gated outputs, KV compression and eviction, Gated
DeltaNet / Mamba-2 / 3:1 hybrids. Each question carries a model answer, key points and a `source`
naming its paper and the test below ("checked by test_…"); each figure is rebuilt from the stated
configuration (a formula, a small simulation, a bit layout) and then looked up in the question's
own text, so a wrong number in prompts/ fails.
"""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest

from attn_kit.load import catalog

NEW = {  # id -> (topic, exercise it belongs to)
    "spec-acceptance-rule": ("speculative decoding", "kv-cache"),
    "spec-expected-tokens": ("speculative decoding", "kv-cache"),
    "spec-tree-drafts": ("speculative decoding", "kv-cache"),
    "spec-verify-is-nearly-free": ("speculative decoding", "kv-cache"),
    "prefix-block-hash": ("prefix caching", "paged-attention"),
    "prefix-radix-tree": ("prefix caching", "paged-attention"),
    "prefix-eviction": ("prefix caching", "paged-attention"),
    "prefix-hit-ttft": ("prefix caching", "paged-attention"),
    "flex-score-mod": ("FlexAttention", "mha-masked-bias"),
    "flex-block-mask": ("FlexAttention", "mha-masked-bias"),
    "flex-document-mask": ("FlexAttention", "mha-masked-bias"),
    "flex-sliding-window-tiles": ("FlexAttention", "mha-masked-bias"),
    "ttft-vs-tpot": ("disaggregated prefill and decode", "paged-attention"),
    "kv-transfer-size": ("disaggregated prefill and decode", "paged-attention"),
    "kv-transfer-vs-model-size": ("disaggregated prefill and decode", "paged-attention"),
    "goodput": ("disaggregated prefill and decode", "paged-attention"),
    "fa4-exp-bottleneck": ("FlashAttention-4 and FP4", "tiled-softmax"),
    "fa4-conditional-rescale": ("FlashAttention-4 and FP4", "tiled-softmax"),
    "fp4-microscaling": ("FlashAttention-4 and FP4", "mha-masked-bias"),
    "fp4-kv-cache": ("FlashAttention-4 and FP4", "mha-masked-bias"),
    "alibi-slopes": ("ALiBi, sink logits, gated output", "rope"),
    "sink-logits": ("ALiBi, sink logits, gated output", "sliding-window"),
    "streaming-sinks-cache": ("ALiBi, sink logits, gated output", "sliding-window"),
    "gated-attention-output": ("ALiBi, sink logits, gated output", "mha-screen"),
    "h2o-heavy-hitters": ("KV compression and eviction", "gqa"),
    "snapkv-prompt-compression": ("KV compression and eviction", "gqa"),
    "kivi-two-bit": ("KV compression and eviction", "gqa"),
    "cross-layer-kv-sharing": ("KV compression and eviction", "gqa"),
    "delta-rule-state": ("Gated DeltaNet, Mamba-2, hybrids", "kv-cache"),
    "mamba2-chunkwise": ("Gated DeltaNet, Mamba-2, hybrids", "kv-cache"),
    "hybrid-three-to-one": ("Gated DeltaNet, Mamba-2, hybrids", "kv-cache"),
    "linear-state-vs-cache": ("Gated DeltaNet, Mamba-2, hybrids", "kv-cache"),
}

QUESTIONS = {q.id: (e, q) for e in catalog.exercises().values() for q in e.questions}
H100_BYTES, FLOPS = 3.35e12, 1e15  # the stated hardware: an H100 SXM's HBM3, 10¹⁵ FLOP/s dense BF16
PER_TOKEN = 2 * 32 * 8 * 128 * 2  # an 8B-class model's KV bytes per token: K and V, 32 layers, 8 heads of 128, bf16


def text(question_id: str) -> str:
    _, q = QUESTIONS[question_id]
    return " ".join(" ".join((q.prompt, q.answer, *q.key_points)).split())


def says(question_id: str, *phrases: str) -> None:
    body = text(question_id)
    missing = [p for p in phrases if p not in body]
    assert not missing, (question_id, missing)


# --- the bank ------------------------------------------------------------------------------------------


def test_at_least_thirty_new_questions_each_in_its_exercise_with_answer_points_and_source():
    assert len(NEW) >= 30
    for question_id, (_, exercise_id) in NEW.items():
        exercise, q = QUESTIONS[question_id]
        assert exercise.id == exercise_id, question_id
        assert q.answer.strip() and q.source.strip() and len(q.key_points) >= 3, question_id
        assert 1 <= len(q.required) <= 2, question_id


def test_every_topic_of_the_issue_has_four_questions():
    topics: dict[str, int] = {}
    for topic, _ in NEW.values():
        topics[topic] = topics.get(topic, 0) + 1
    assert len(topics) == 8 and set(topics.values()) == {4}


def test_every_source_names_a_paper_and_a_test_in_this_file():
    here = sys.modules[__name__]
    for question_id in NEW:
        _, q = QUESTIONS[question_id]
        named = re.search(r"checked by (test_\w+)", q.source)
        assert named and callable(getattr(here, named.group(1), None)), (question_id, q.source)
        assert len(q.source.split("; checked by")[0]) > 10, question_id  # the paper or docs come first


def test_the_lookup_can_fail():
    with pytest.raises(AssertionError):
        says("spec-expected-tokens", "3.37 tokens per target pass")


# --- speculative decoding ----------------------------------------------------------------------------


def speculative_output(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The distribution of one speculative step's token: accept min(1, p/q), else the residual."""
    accept = np.minimum(1.0, p / q)
    alpha = float(np.minimum(p, q).sum())
    residual = np.maximum(0.0, p - q)
    return q * accept + (1 - alpha) * residual / residual.sum()


def test_spec_acceptance_rule():
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.2, 0.6, 0.2])
    alpha = float(np.minimum(p, q).sum())
    assert math.isclose(alpha, 0.7)
    residual = np.maximum(0.0, p - q)
    np.testing.assert_allclose(residual / residual.sum(), [1, 0, 0])
    np.testing.assert_allclose(speculative_output(p, q), p)
    rng = np.random.default_rng(0)  # and on random pairs
    for _ in range(20):
        a, b = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(6))
        np.testing.assert_allclose(speculative_output(a, b), a, atol=1e-12)
    says("spec-acceptance-rule", "α = 0.7, the residual is [1, 0, 0]", "0.2 + 0.3·1 = 0.5, 0.6·0.5 = 0.3", "min(1, p(x)/q(x))")


def test_spec_expected_tokens():
    alpha, k, c = 0.8, 4, 0.05
    tokens = (1 - alpha ** (k + 1)) / (1 - alpha)
    assert math.isclose(tokens, sum(alpha**i for i in range(k + 1)))
    assert f"{tokens:.2f}" == "3.36" and f"{tokens / (k * c + 1):.2f}" == "2.80"
    # a simulation of rounds agrees
    rng = np.random.default_rng(1)
    accepted = rng.random((200_000, k)) < alpha
    run = np.where(accepted.all(1), k, accepted.argmin(1))
    assert abs((run + 1).mean() - tokens) < 0.02
    says("spec-expected-tokens", "(1 − 0.32768) / 0.2 = 3.36", "3.36 / (4·0.05 + 1) = 2.80", "α = 0.8 and k = 4: 3.36 tokens")


def test_spec_tree_drafts():
    level = 1 - 0.4**2
    assert math.isclose(level, 0.84)
    chain = (1 - 0.6**4) / (1 - 0.6)
    tree = (1 - level**4) / (1 - level)
    assert (f"{chain:.2f}", f"{tree:.2f}") == ("2.18", "3.14")
    assert 2 + 4 + 8 == 14
    says("spec-tree-drafts", "1 − 0.4² = 0.84", "(1 − 0.6⁴)/(1 − 0.6) = 2.18", "(1 − 0.84⁴)/(1 − 0.84) = 3.14", "2 + 4 + 8 = 14 nodes")
    # the tree mask: a node sees its ancestors only (root 0, children 1 and 2, grandchildren of 1: 3, 4)
    parent = {1: 0, 2: 0, 3: 1, 4: 1}

    def ancestors(n):
        out = {n}
        while n in parent:
            n = parent[n]
            out.add(n)
        return out

    mask = np.array([[j in ancestors(i) for j in range(5)] for i in range(5)])
    assert not mask[2, 1] and mask[3, 1] and not mask[3, 2]  # siblings never see each other


def test_spec_verify_cost():
    weights = 16e9
    read = weights / H100_BYTES
    flops = 2 * 8e9 * 5
    assert f"{read * 1e3:.1f}" == "4.8" and flops == 8e10 and f"{flops / FLOPS * 1e3:.2f}" == "0.08"
    assert flops / FLOPS < read / 10
    says("spec-verify-is-nearly-free", "at least 4.8 ms at 3.35 TB/s", "2·8·10⁹·5 = 8·10¹⁰ FLOPs: 0.08 ms at 10¹⁵ FLOP/s")


# --- prefix caching ------------------------------------------------------------------------------------


def test_prefix_block_hash():
    block = 16
    assert (1000 // block, 1000 // block * block, 1000 % block) == (62, 992, 8)
    assert (700 // block, 700 // block * block) == (43, 688)
    # a chained key differs for the same tokens after a different prefix; a flat one does not
    a, b = list(range(32)), [99] * 16 + list(range(16, 32))

    def chain(tokens):
        key, keys = None, []
        for i in range(0, len(tokens) - len(tokens) % block, block):
            key = hash((key, tuple(tokens[i : i + block])))
            keys.append(key)
        return keys

    assert tuple(a[16:]) == tuple(b[16:]) and chain(a)[1] != chain(b)[1]
    says("prefix-block-hash", "62 full blocks, 992 tokens", "last 8 tokens", "43 full blocks (688 tokens)", "prefill starts at token 688")


def test_prefix_radix_tree():
    without, with_cache = 10 * (2000 + 200), 2000 + 10 * 200
    assert (without, with_cache) == (22000, 4000) and f"{1 - with_cache / without:.1%}" == "81.8%"
    says("prefix-radix-tree", "10·2,200 = 22,000 tokens to 2,000 + 10·200 = 4,000: 81.8 % less")


def test_prefix_eviction():
    block_bytes = 16 * PER_TOKEN
    assert PER_TOKEN == 131072 and block_bytes == 2 * 2**20
    blocks = 10 * 2**30 // block_bytes
    assert (blocks, blocks * 16) == (5120, 81920)
    says("prefix-eviction", "2 · 32 · 8 · 128 · 2 = 131,072 bytes, 128 KiB", "holds 5,120 blocks, 81,920 tokens")


def test_prefix_hit_ttft():
    flops = 2 * 8e9 * 4000
    assert flops == 6.4e13 and flops / FLOPS * 1e3 == pytest.approx(64)
    assert 2 * 8e9 * 400 / FLOPS * 1e3 == pytest.approx(6.4)
    says("prefix-hit-ttft", "2 · 8·10⁹ · 4,000 = 6.4·10¹³ FLOPs", "at least 64 ms", "about 6.4 ms")


# --- FlexAttention ------------------------------------------------------------------------------------


def tiles(allowed: np.ndarray, block: int = 128) -> tuple[int, int, int]:
    """(computed, full, partial) tiles of a T×T boolean mask at `block`-sized tiles."""
    n = allowed.shape[0] // block
    grid = allowed.reshape(n, block, n, block).transpose(0, 2, 1, 3)
    some, every = grid.any((2, 3)), grid.all((2, 3))
    return int(some.sum()), int(every.sum()), int((some & ~every).sum())


T = 4096
Q_IDX, KV_IDX = np.arange(T)[:, None], np.arange(T)[None, :]


def test_flex_score_mod():
    assert f"{50 * math.tanh(100 / 50):.1f}" == "48.2"
    capped = 50 * np.tanh(np.array([-1e4, 0.0, 1e4]) / 50)
    assert np.all(np.abs(capped) <= 50)
    says("flex-score-mod", "50·tanh(2) ≈ 48.2", "score + slope[h] · (kv_idx − q_idx)")


def test_flex_block_mask():
    assert tiles(KV_IDX <= Q_IDX) == (528, 496, 32) and 32 * 33 // 2 == 528 and 32 * 32 == 1024
    says("flex-block-mask", "32 × 32 = 1,024 tiles, 528 computed (496 full and 32 partial on the diagonal), 496 skipped")


def test_flex_document_mask():
    doc = np.arange(T) // 1024
    computed, full, partial = tiles((KV_IDX <= Q_IDX) & (doc[:, None] == doc[None, :]))
    assert (computed, full, partial) == (144, 112, 32) and 8 * 9 // 2 == 36
    assert f"{computed / 1024:.1%}" == "14.1%"
    says("flex-document-mask", "8·9/2 = 36, 32 full and 4 on the diagonal", "144 of 1,024 tiles, 14.1 %")


def test_flex_sliding_window_tiles():
    band = (KV_IDX <= Q_IDX) & (Q_IDX - KV_IDX < 1024)
    assert tiles(band) == (252, 196, 56)
    per_row = band.reshape(32, 128, 32, 128).any((1, 3)).sum(1)
    assert per_row.max() == 9  # a query block reaches at most nine key blocks
    says("flex-sliding-window-tiles", "at most nine key blocks back")
    assert 32768**2 == 1_073_741_824 == 2**30
    says("flex-sliding-window-tiles", "252 of the 1,024 tiles", "196 full, 56 partial", "1,073,741,824 bytes, 1 GiB")


# --- disaggregated prefill and decode -------------------------------------------------------------------


def test_ttft_vs_tpot():
    prefill = 2 * 8e9 * 2000 / FLOPS
    step = 16e9 / H100_BYTES
    assert f"{prefill * 1e3:.0f}" == "32" and f"{step * 1e3:.1f}" == "4.8" and f"{prefill / step:.1f}" == "6.7"
    says("ttft-vs-tpot", "3.2·10¹³ FLOPs, takes 32 ms", "about 6.7 steps", "16 GB at 3.35 TB/s")


def test_kv_transfer_size():
    size = 4000 * PER_TOKEN
    assert size == 524_288_000 and f"{size / 2**30:.2f}" == "0.49"
    assert f"{size / 50e9 * 1e3:.1f}" == "10.5" and f"{size / 900e9 * 1e3:.2f}" == "0.58"
    assert 400e9 / 8 == 50e9  # 400 Gb/s in bytes
    prefill = 2 * 8e9 * 4000 / FLOPS
    assert prefill * 1e3 == pytest.approx(64) and 0.16 < size / 50e9 / prefill < 1 / 6
    says("kv-transfer-size", "4,000 · 131,072 = 524,288,000 bytes, about 0.49 GiB", "about 10.5 ms", "0.58 ms", "64 ms")


def test_kv_transfer_vs_model_size():
    small, large = PER_TOKEN, 2 * 80 * 8 * 128 * 2
    assert large == 327_680
    send_small, send_large = small / 50e9 * 1e6, large / 50e9 * 1e6
    compute_small, compute_large = 2 * 8e9 / FLOPS * 1e6, 2 * 70e9 / FLOPS * 1e6
    assert (f"{send_small:.1f}", f"{send_large:.1f}", compute_small, compute_large) == ("2.6", "6.6", 16.0, 140.0)
    assert round(send_small / compute_small, 2) == 0.16 and round(send_large / compute_large, 2) == 0.05
    says("kv-transfer-vs-model-size", "131,072 bytes per token, 2.6 µs", "327,680 bytes, 6.6 µs", "about 0.16 to about 0.05")


def test_goodput():
    requests, good, seconds = 100, 80, 10
    assert (requests / seconds, good / seconds) == (10, 8)
    says("goodput", "goodput 8 per second", "(throughput 10 per second)")


# --- FlashAttention-4 and FP4 ---------------------------------------------------------------------------


def test_fa4_exp_bottleneck():
    d, exp_rate = 128, 3.9e12
    per_score = 4 * d
    h100, b200 = per_score / 1e15, per_score / 2.25e15
    exp = 1 / exp_rate
    assert per_score == 512 and (f"{h100:.1e}", f"{b200:.1e}", f"{exp:.1e}") == ("5.1e-13", "2.3e-13", "2.6e-13")
    assert b200 < exp < h100  # the exp hides on an H100 and dominates on a B200
    assert f"{1605 / 2250:.0%}" == "71%"
    says("fa4-exp-bottleneck", "512 at d = 128", "5.1·10⁻¹³ s of matmul per score against 2.6·10⁻¹³ s of exp", "2.3·10⁻¹³ s of matmul")
    says("fa4-exp-bottleneck", "(5.1·10⁻¹³ s of matmul on an H100)", "1,605 TFLOP/s, 71 %")


def test_fa4_conditional_rescale():
    """An online softmax that rescales only when the max grows by more than 8 (log2) is exact."""
    rng = np.random.default_rng(5)
    scores, values = rng.normal(scale=6, size=64), rng.normal(size=(64, 3))
    threshold = math.log(2**8)
    m, l, acc, rescales, biggest = -np.inf, 0.0, np.zeros(3), 0, 0.0
    for start in range(0, 64, 8):
        s = scores[start : start + 8]
        if s.max() > m + threshold or not np.isfinite(m):
            new = s.max()
            factor = np.exp(m - new) if np.isfinite(m) else 0.0
            l, acc, m, rescales = l * factor, acc * factor, new, rescales + 1
        p = np.exp(s - m)
        biggest = max(biggest, p.max())
        l, acc = l + p.sum(), acc + p @ values[start : start + 8]
    exact = np.exp(scores - scores.max())
    np.testing.assert_allclose(acc / l, exact @ values / exact.sum(), rtol=1e-12)
    assert biggest <= 2**8 + 1e-9 and rescales < 8
    says("fa4-conditional-rescale", "factor 2⁸ = 256", "out = acc / l")


E2M1 = sorted({s * m * 2.0**e for s in (1, -1) for e, m in ((0, 0), (-1, 1), (0, 1), (0, 1.5), (1, 1), (1, 1.5), (2, 1), (2, 1.5))})


def test_fp4_microscaling():
    magnitudes = sorted({abs(v) for v in E2M1})
    assert magnitudes == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert magnitudes[-1] / magnitudes[1] == 12
    assert (4 + 8 / 32, 4 + 8 / 16) == (4.25, 4.5)
    # round to nearest: within 2⁻² relative over the normal range 1 to 6, a third below 1 (0.75)
    grid = np.array(magnitudes[1:])

    def worst(lo, hi):
        xs = np.linspace(lo, hi, 10001)
        nearest = grid[np.abs(xs[:, None] - grid[None, :]).argmin(1)]
        return (np.abs(nearest - xs) / xs).max()

    assert worst(1, 6) <= 2**-2 + 1e-12 and worst(0.5, 1) == pytest.approx(1 / 3, rel=1e-3)
    says(
        "fp4-microscaling",
        "0, 0.5, 1, 1.5, 2, 3, 4 and 6",
        "a ratio of 12",
        "2⁻² = 25 % relative between 1 and 6 (a third, below 1)",
        "4 + 8/32 = 4.25 bits",
        "4 + 8/16 = 4.5 bits",
    )


def test_fp4_kv_cache():
    numbers = 2 * 32 * 8 * 128
    assert (numbers, numbers * 2, numbers) == (65536, 131072, 65536)
    nvfp4 = numbers * 4.5 / 8
    assert nvfp4 == 36864 and nvfp4 / 1024 == 36 and f"{numbers * 2 / nvfp4:.2f}" == "3.56"
    says("fp4-kv-cache", "65,536 · 4.5 / 8 = 36,864 bytes (36 KiB), 3.56 times smaller")


# --- ALiBi, sink logits, gated output --------------------------------------------------------------------


def alibi_slopes(heads: int) -> list[float]:
    start = 2 ** (-8 / heads)
    return [start ** (h + 1) for h in range(heads)]


def test_alibi_slopes():
    assert alibi_slopes(8) == [2.0**-i for i in range(1, 9)]
    assert f"{math.exp(-0.5 * 10):.4f}" == "0.0067"
    says("alibi-slopes", "for 8 heads 1/2, 1/4, …, 1/256", "e^(−5) ≈ 0.0067", "2^(−8/H)")


def test_sink_logits():
    scores, sink = np.array([1.0, 1.0]), 1.0
    weights = np.exp(scores) / (np.exp(scores).sum() + np.exp(sink))
    np.testing.assert_allclose(weights, [1 / 3, 1 / 3])
    assert math.isclose(weights.sum(), 2 / 3)
    says("sink-logits", "each weight is e/(3e) = 1/3, a total of 2/3", "128-token")


def test_streaming_sinks_cache():
    tokens = 4 + 2044
    assert tokens == 2048 and tokens * PER_TOKEN == 256 * 2**20
    says("streaming-sinks-cache", "the cache holds 2,048 tokens forever, 2,048 · 128 KiB = 256 MiB per sequence")


def test_gated_attention_output():
    assert 4096**2 == 16_777_216
    says("gated-attention-output", "4,096² = 16,777,216 parameters", "σ(x·W_g)")


# --- KV compression and eviction -------------------------------------------------------------------------


def test_h2o_heavy_hitters():
    T, budget = 5000, 0.2
    kept = round(T * budget)
    assert kept == 1000 and kept // 2 == 500
    says("h2o-heavy-hitters", "keeps 500 recent and 500 heavy hitters: 1,000 entries, a fifth")


def test_snapkv_prompt_compression():
    assert 16384 // 1024 == 16
    says("snapkv-prompt-compression", "16,384-token prompt kept to 1,024 entries per head has a cache 16 times smaller")


def test_kivi_two_bit():
    group = 32
    bits = (group * 2 + 16 + 16) / group
    assert bits == 3 and f"{16 / bits:.2f}" == "5.33"
    says("kivi-two-bit", "(32·2 + 32) / 32 = 3 bits per number, 16/3 = 5.33 times smaller")


def test_cross_layer_kv_sharing():
    shared = 2 * 16 * 8 * 128 * 2
    assert shared == 65536 == PER_TOKEN // 2
    says("cross-layer-kv-sharing", "2 · 16 · 8 · 128 · 2 = 65,536 bytes per token in bf16, 64 KiB instead of 128 KiB")


# --- Gated DeltaNet, Mamba-2, hybrids ----------------------------------------------------------------


def test_delta_rule_state():
    rng = np.random.default_rng(3)
    d = 4
    S = rng.normal(size=(d, d))
    k = rng.normal(size=d)
    k /= np.linalg.norm(k)
    v = rng.normal(size=d)
    for alpha in (1.0, 0.7):
        new = alpha * S @ (np.eye(d) - np.outer(k, k)) + np.outer(v, k)  # β = 1
        np.testing.assert_allclose(new @ k, v, atol=1e-12)  # the delta rule stores v under k exactly
    plain = S + np.outer(v, k)  # linear attention keeps the old association too
    assert not np.allclose(plain @ k, v)
    assert 128 * 128 == 16384
    says("delta-rule-state", "128 × 128 = 16,384 numbers", "S_t·k_t = v_t exactly")


def test_mamba2_chunkwise():
    """The chunked form of a scalar-decay recurrence equals the sequential one."""
    rng = np.random.default_rng(4)
    L, C, n, p = 12, 4, 3, 2
    a = rng.uniform(0.5, 1.0, size=L)
    B, Cm, x = rng.normal(size=(L, n)), rng.normal(size=(L, n)), rng.normal(size=(L, p))
    h, seq = np.zeros((n, p)), []
    for t in range(L):
        h = a[t] * h + np.outer(B[t], x[t])
        seq.append(Cm[t] @ h)
    state, chunked = np.zeros((n, p)), []
    for s in range(0, L, C):
        decay = np.cumprod(a[s : s + C])  # a_s … a_t within the chunk
        mask = np.tril(decay[:, None] / decay[None, :])  # L[t, u] = a_{u+1} … a_t
        intra = (Cm[s : s + C] @ B[s : s + C].T * mask) @ x[s : s + C]
        chunked.append(intra + decay[:, None] * (Cm[s : s + C] @ state))
        state = decay[-1] * state + (B[s : s + C] * (decay[-1] / decay)[:, None]).T @ x[s : s + C]
    np.testing.assert_allclose(np.vstack(chunked), np.array(seq), atol=1e-12)
    T, chunk = 8192, 256
    assert (T // chunk, chunk / T) == (32, 1 / 32)
    says("mamba2-chunkwise", "At T = 8,192 and C = 256 there are 32 chunks", "C/T = 1/32")


def test_hybrid_three_to_one():
    layers = 48
    attention = layers // 4
    assert attention == 12 and attention / layers == 0.25
    says("hybrid-three-to-one", "12 of 48 layers, a cache 1/4", "75 % cut", "128 × 128 numbers per head")


def test_linear_state_vs_cache():
    state, per_token = 16 * 128 * 128, 2 * 8 * 128
    assert (state, per_token, state // per_token) == (262144, 2048, 128)
    assert state * 2 == 512 * 1024  # bf16 bytes: 512 KiB
    big = 131072 * per_token
    assert big == 268_435_456 and big // state == 1024
    says(
        "linear-state-vs-cache",
        "16 · 128 · 128 = 262,144 numbers (512 KiB",
        "262,144 / 2,048 = 128 tokens",
        "268,435,456 numbers, 1,024 times",
    )
