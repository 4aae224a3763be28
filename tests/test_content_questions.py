"""The 2026 question bank: every figure in a new discussion question is recomputed here.

Each new question carries a model answer and a `source` naming the test below that checks it
("checked by test_…"). The figures are rebuilt from the stated configuration or assumption (a
formula, a bit layout, a small simulation), then looked up in the question's own text, so a
wrong number in prompts/ fails.
"""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest

from attn_kit.load import catalog

from conftest import need_torch

NEW = {  # id -> the 2026 screen topic it covers
    "flash2-loop-order": "FlashAttention-2 loop order and deferred normalisation",
    "flash3-hopper": "FlashAttention-3 asynchrony and FP8",
    "fp8-attention": "FP8 attention",
    "fp8-kv-cache": "FP8 KV caches",
    "yarn-temperature": "YaRN temperature",
    "yarn-by-parts": "YaRN frequency interpolation",
    "llama3-rope-scaling": "Llama-3 scaling",
    "longrope": "LongRoPE scaling",
    "nope-interleaved": "NoPE and interleaved-RoPE layers",
    "ring-attention": "ring attention and context parallelism",
    "ulysses-vs-ring": "context parallelism by heads",
    "linear-attention": "linear attention",
    "ssm-hybrids": "state-space models and hybrids",
    "native-sparse-attention": "native sparse attention",
    "deepseek-sparse-attention": "DeepSeek sparse attention",
    "continuous-batching": "continuous batching",
    "chunked-prefill": "chunked prefill",
    "decode-intensity-group-size": "decode arithmetic intensity vs GQA group size",
    "mla-latent-cache": "MLA latent cache",
    "mla-weight-absorption": "MLA weight absorption",
    "mla-decode-intensity": "MLA decode arithmetic intensity",
}

QUESTIONS = {q.id: (e, q) for e in catalog.exercises().values() for q in e.questions}


def text(question_id: str) -> str:
    """The question as one line: prompt, model answer and key points."""
    _, q = QUESTIONS[question_id]
    return " ".join(" ".join((q.prompt, q.answer, *q.key_points)).split())


def says(question_id: str, *phrases: str) -> None:
    body = text(question_id)
    missing = [p for p in phrases if p not in body]
    assert not missing, (question_id, missing)


def grouped(n: float) -> str:
    return f"{n:,.0f}"


# --- the bank itself --------------------------------------------------------------------------------


def test_the_new_questions_exist_with_answers_and_sources():
    assert len(NEW) >= 20
    for question_id in NEW:
        exercise, q = QUESTIONS[question_id]
        assert q.answer.strip() and q.source.strip() and len(q.key_points) >= 3, question_id
        assert 1 <= len(q.required) <= 2, question_id


def test_every_source_names_a_test_in_this_file():
    here = sys.modules[__name__]
    for question_id in NEW:
        _, q = QUESTIONS[question_id]
        named = re.search(r"checked by (test_\w+)", q.source)
        assert named and callable(getattr(here, named.group(1), None)), (question_id, q.source)


def test_the_bank_check_can_fail():
    """A question with a made-up figure is caught by the lookup the tests use."""
    with pytest.raises(AssertionError):
        says("yarn-temperature", "1.2966 on the logits")


# --- FlashAttention-2 and -3 ------------------------------------------------------------------------


def test_flash2_deferred_normalisation():
    rng = np.random.default_rng(0)
    T, S, d, dv, block = 5, 12, 4, 3, 4
    q, k, v = rng.normal(size=(T, d)), rng.normal(size=(S, d)), rng.normal(size=(S, dv))
    s_all = q @ k.T / math.sqrt(d)
    expected = np.exp(s_all - s_all.max(1, keepdims=True))
    expected = expected / expected.sum(1, keepdims=True) @ v
    m, l, acc, divisions = np.full(T, -np.inf), np.zeros(T), np.zeros((T, dv)), 0
    m1, l1, out1, divisions_each = np.full(T, -np.inf), np.zeros(T), np.zeros((T, dv)), 0
    for start in range(0, S, block):
        s = s_all[:, start : start + block]
        m_new = np.maximum(m, s.max(1))
        p = np.exp(s - m_new[:, None])
        l = np.exp(m - m_new) * l + p.sum(1)
        acc = np.exp(m - m_new)[:, None] * acc + p @ v[start : start + block]
        m = m_new
        # the v1 way: keep the output normalised after every block
        m1_new = np.maximum(m1, s.max(1))
        p1 = np.exp(s - m1_new[:, None])
        l1_new = np.exp(m1 - m1_new) * l1 + p1.sum(1)
        out1 = ((l1 * np.exp(m1 - m1_new))[:, None] * out1 + p1 @ v[start : start + block]) / l1_new[:, None]
        divisions_each += out1.size
        m1, l1 = m1_new, l1_new
    out = acc / l[:, None]
    divisions += out.size
    np.testing.assert_allclose(out, expected, atol=1e-12)
    np.testing.assert_allclose(out1, expected, atol=1e-12)
    assert divisions_each == divisions * math.ceil(S / block)
    lse = m + np.log(l)  # what the backward keeps
    np.testing.assert_allclose(lse, np.log(np.exp(s_all).sum(1)), atol=1e-12)
    assert 4096 // 128 == 32
    says("flash2-loop-order", "S/block_size times", "(32 times at S = 4096, block 128)", "m + log l")


def test_flash3_exp_budget_and_incoherent_processing():
    d = 128
    per_exp = 2 * d + 2 * d  # q·k and p·v per score
    assert per_exp == 512
    ratio = 989 / 3.9  # the throughputs the FA3 paper quotes
    assert round(ratio) == 254 and abs(ratio / per_exp - 0.5) < 0.01  # exp takes about half the matmul time
    says("flash3-hopper", "4·d FLOPs", "512 FLOPs per exp at d = 128", "989 TFLOPS", "3.9 TFLOPS", "a ratio near 254", "about half as long")
    rng = np.random.default_rng(1)
    n = 8
    hadamard = np.array([[1.0]])
    while hadamard.shape[0] < n:
        hadamard = np.block([[hadamard, hadamard], [hadamard, -hadamard]])
    M = hadamard / math.sqrt(n) * rng.choice([-1.0, 1.0], size=n)  # random signs: still orthogonal
    np.testing.assert_allclose(M @ M.T, np.eye(n), atol=1e-12)
    Q, K = rng.normal(size=(4, n)), rng.normal(size=(5, n))
    K[:, 2] *= 50  # an outlier channel
    np.testing.assert_allclose((Q @ M) @ (K @ M).T, Q @ K.T, atol=1e-9)
    assert np.abs(K @ M).max() < np.abs(K).max()  # the outlier is spread out


# --- FP8 ---------------------------------------------------------------------------------------------


def fp8_max(exponent_bits: int, mantissa_bits: int, ieee_like: bool) -> float:
    """Largest finite value: E5M2 reserves the top exponent for inf/NaN (as IEEE); E4M3 ('fn')
    uses it for numbers and keeps only mantissa all-ones as NaN."""
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2**exponent_bits - 1 - (1 if ieee_like else 0)
    mantissa = (2**mantissa_bits - 1 - (0 if ieee_like else 1)) / 2**mantissa_bits
    return 2.0 ** (top - bias) * (1 + mantissa)


def test_fp8_formats():
    e4m3, e5m2 = fp8_max(4, 3, ieee_like=False), fp8_max(5, 2, ieee_like=True)
    assert (e4m3, e5m2) == (448, 57344)
    assert (2.0 ** -(3 + 1), 2.0 ** -(2 + 1)) == (0.0625, 0.125)  # unit roundoff 2^-(mantissa+1)
    says("fp8-attention", "largest finite value 448", "largest 57,344", "2⁻⁴ (6.25 %)", "2⁻³ (12.5 %)")
    torch = need_torch()  # a skip the summary line counts (and a failure in CI)
    if hasattr(torch, "float8_e4m3fn"):
        assert torch.finfo(torch.float8_e4m3fn).max == e4m3 and torch.finfo(torch.float8_e5m2).max == e5m2
        assert torch.finfo(torch.float8_e4m3fn).eps == 2 * 0.0625  # eps is the spacing at 1: 2u


def test_fp8_kv_cache_bytes():
    layers, kv_heads, hd = 32, 8, 128
    numbers = 2 * layers * kv_heads * hd
    assert numbers == 65536
    bf16, fp8 = numbers * 2, numbers
    assert (bf16, fp8) == (131072, 65536) and bf16 // 1024 == 128 and fp8 // 1024 == 64
    scales = 2 * layers * kv_heads * 4
    assert scales == 2048 and scales / fp8 == 0.03125
    says(
        "fp8-kv-cache",
        "2·32·8·128 = 65,536 numbers",
        "131,072 bytes (128 KiB)",
        "65,536 bytes (64 KiB)",
        "2 × 32 × 8 × 4 = 2,048 bytes, 3.125 %",
    )


# --- RoPE at long context -----------------------------------------------------------------------------


def test_yarn_temperature():
    for s, per_vector, logits in ((4, "1.1386", "1.2965"), (16, "1.2773", "1.6314")):
        factor = 0.1 * math.log(s) + 1
        assert f"{factor:.4f}" == per_vector and f"{factor**2:.4f}" == logits
        says("yarn-temperature", per_vector, logits)
    says("yarn-temperature", "sqrt(1/t) = 0.1·ln(s) + 1")
    # scaling q and k by the factor scales every logit by its square: the softmax sharpens
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=8), rng.normal(size=(6, 8))
    f = 0.1 * math.log(4) + 1
    np.testing.assert_allclose((f * k) @ (f * q), f * f * (k @ q))


def rope_frequencies(base: float, d: int) -> np.ndarray:
    return base ** (-np.arange(0, d, 2) / d)


def test_yarn_by_parts_counts():
    theta = rope_frequencies(10000.0, 128)
    turns = 4096 / (2 * math.pi / theta)
    alpha, beta = 1, 32
    kept, scaled = int((turns > beta).sum()), int((turns < alpha).sum())
    assert (kept, scaled, len(theta) - kept - scaled) == (21, 18, 25)
    says("yarn-by-parts", "21 of the 64 pairs are left alone, 18 are fully interpolated and 25 are on the ramp")


def llama3_scaled(theta: np.ndarray, factor=8.0, low=1.0, high=4.0, original=8192) -> tuple[np.ndarray, list[str]]:
    out, kinds = [], []
    for f in theta:
        wavelen = 2 * math.pi / f
        if wavelen < original / high:
            out.append(f)
            kinds.append("kept")
        elif wavelen > original / low:
            out.append(f / factor)
            kinds.append("scaled")
        else:
            g = (original / wavelen - low) / (high - low)
            out.append((1 - g) * f / factor + g * f)
            kinds.append("blended")
    return np.array(out), kinds


def test_llama3_rope_scaling():
    theta = rope_frequencies(500000.0, 128)
    new, kinds = llama3_scaled(theta)
    assert [kinds.count(k) for k in ("kept", "scaled", "blended")] == [29, 29, 6]
    assert 8192 / 4 == 2048
    blended = np.array([kind == "blended" for kind in kinds])
    assert np.all(new[blended] < theta[blended]) and np.all(new[blended] > theta[blended] / 8)  # in between
    says("llama3-rope-scaling", "29 pairs are kept, 29 divided by 8 and 6 blended", "8,192 / 4 = 2,048")
    # the code block in the answer, run as written, gives the same frequencies
    _, q = QUESTIONS["llama3-rope-scaling"]
    code = re.search(r"\n((?:    .*\n)+)", q.answer + "\n").group(1)
    namespace: dict = {"math": math, "inv_freq": theta, "results": []}
    loop = re.sub(r"^    ", "", code, flags=re.MULTILINE) + "    results.append(new)\n"
    exec(compile(loop, "llama3-answer", "exec"), namespace)  # noqa: S102
    np.testing.assert_allclose(np.array(namespace["results"]), new)


def test_longrope_scaling():
    s, L = 131072 / 4096, 4096
    assert s == 32
    per_vector = math.sqrt(1 + math.log(s) / math.log(L))
    assert f"{per_vector:.4f}" == "1.1902" and math.isclose(per_vector**2, 1 + 5 / 12)
    says("longrope", "1.1902 per vector", "1 + 5/12 = 1.4167", "sqrt(1 + ln(s)/ln(L))")


def causal_attention(x):
    T, d = x.shape
    s = np.where(np.tril(np.ones((T, T), bool)), x @ x.T / math.sqrt(d), -np.inf)
    w = np.exp(s - s.max(1, keepdims=True))
    return (w / w.sum(1, keepdims=True)) @ x


def test_nope_interleaved_cache_fraction():
    W, T = 4096, 131072
    fraction = (3 * min(W, T) + T) / (4 * T)
    assert f"{fraction:.1%}" == "27.3%"
    says("nope-interleaved", "27.3 % at W = 4,096 and T = 131,072")
    # Llama 4's RoPE layers are chunked (C = 8,192), not sliding: a token sees only its own chunk
    C = 8192
    seen = [t % C + 1 for t in range(T)]  # keys a chunked layer's query t attends to
    assert max(seen) == C and seen[C] == 1  # the first token of a chunk sees only itself
    chunked = (3 * C + T) / (4 * T)
    assert f"{chunked:.1%}" == "29.7%"
    says("nope-interleaved", "chunk of C = 8,192 tokens", "(3·C + T)/(4T) of all-global, 29.7 % at T = 131,072", "29.7 % at T = 131,072")
    assert "calls its interleaving iRoPE" not in text("nope-interleaved")
    # order leaks through a causal mask: identical tokens, different outputs by position count
    x = np.tile(np.array([[1.0, 0.0]]), (3, 1))
    x[1] = [0.0, 1.0]
    out = causal_attention(x)
    swapped = causal_attention(x[[1, 0, 2]])
    assert not np.allclose(swapped, out[[1, 0, 2]])


# --- context parallelism --------------------------------------------------------------------------------


def test_ring_attention_merge_and_overlap():
    rng = np.random.default_rng(3)
    N, chunk, d = 4, 3, 5
    T = N * chunk
    q, k, v = rng.normal(size=(T, d)), rng.normal(size=(T, d)), rng.normal(size=(T, d))
    s_all = q @ k.T / math.sqrt(d)
    full = np.exp(s_all - s_all.max(1, keepdims=True))
    full = full / full.sum(1, keepdims=True) @ v
    out = np.zeros_like(full)
    for device in range(N):  # each device's queries stay
        rows = slice(device * chunk, (device + 1) * chunk)
        m, l, acc = np.full(chunk, -np.inf), np.zeros(chunk), np.zeros((chunk, d))
        for step in range(N):  # the K/V chunk it holds at this step
            held = (device - step) % N
            cols = slice(held * chunk, (held + 1) * chunk)
            s = s_all[rows, cols]
            m_new = np.maximum(m, s.max(1))
            p = np.exp(s - m_new[:, None])
            l = np.exp(m - m_new) * l + p.sum(1)
            acc = np.exp(m - m_new)[:, None] * acc + p @ v[cols]
            m = m_new
        out[rows] = acc / l[:, None]
    np.testing.assert_allclose(out, full, atol=1e-12)
    F, W, b = 1e15, 50e9, 2
    per_device = b * F / (2 * W)
    assert per_device == 20000
    n = per_device  # at the bound, compute time equals transfer time
    assert math.isclose(4 * n * n * 128 / F, 2 * n * 128 * b / W)
    says("ring-attention", "T/N ≥ b·F / (2·W)", "at least 20,000 tokens per device")
    # zigzag: with 2N chunks under a causal mask, chunks i and 2N-1-i give every device the same work
    chunks = 2 * N
    work = [c + 1 for c in range(chunks)]  # chunk c's queries see c + 1 chunks of keys
    contiguous = [work[2 * i] + work[2 * i + 1] for i in range(N)]
    zigzag = [work[i] + work[chunks - 1 - i] for i in range(N)]
    assert len(set(zigzag)) == 1 and len(set(contiguous)) == N


def test_ulysses_reshard_is_exact():
    rng = np.random.default_rng(4)
    N, H, T, hd = 4, 8, 8, 3
    q, k, v = (rng.normal(size=(H, T, hd)) for _ in range(3))

    def attend(q, k, v):
        s = q @ k.swapaxes(-1, -2) / math.sqrt(hd)
        w = np.exp(s - s.max(-1, keepdims=True))
        return (w / w.sum(-1, keepdims=True)) @ v

    full = attend(q, k, v)
    seq_shards = [tuple(a[:, i * T // N : (i + 1) * T // N] for a in (q, k, v)) for i in range(N)]
    # all-to-all: device j gathers heads j·H/N..(j+1)·H/N of every sequence shard
    heads = H // N
    outs = []
    for j in range(N):
        qj, kj, vj = (np.concatenate([shard[n][j * heads : (j + 1) * heads] for shard in seq_shards], axis=1) for n in range(3))
        outs.append(attend(qj, kj, vj))
    np.testing.assert_allclose(np.concatenate(outs, axis=0), full, atol=1e-12)
    shard = seq_shards[0][0]  # device 0's q: H × T/N × hd
    kept = shard[:heads].size  # the heads device 0 is assigned
    assert kept / shard.size == 1 / N and (shard.size - kept) / shard.size == (N - 1) / N
    says("ulysses-vs-ring", "keeps 1/N of its T/N-token shard and sends the other (N − 1)/N")
    kv_heads = 8
    assert [n for n in range(1, 17) if kv_heads % n == 0] == [1, 2, 4, 8]
    says("ulysses-vs-ring", "8 K/V heads allow 1, 2, 4 or 8 devices", "at most 8 devices")


# --- linear attention and state-space models -------------------------------------------------------------


def test_linear_attention_recurrence():
    rng = np.random.default_rng(5)
    T, d, dv = 6, 4, 3
    q, k, v = rng.normal(size=(T, d)), rng.normal(size=(T, d)), rng.normal(size=(T, dv))

    def phi(x):
        return np.where(x > 0, x + 1, np.exp(x))  # elu(x) + 1: positive

    causal = np.tril(np.ones((T, T)))
    weights = (phi(q) @ phi(k).T) * causal
    quadratic = weights @ v / weights.sum(1, keepdims=True)
    S, z, recurrent = np.zeros((d, dv)), np.zeros(d), []
    for t in range(T):  # the answer's recurrence
        S = S + np.outer(phi(k[t]), v[t])
        z = z + phi(k[t])
        recurrent.append(phi(q[t]) @ S / (phi(q[t]) @ z))
    np.testing.assert_allclose(np.array(recurrent), quadratic, atol=1e-12)
    d = dv = 128
    assert d * dv == 2 * 64 * d  # the state equals 64 tokens of cache
    says("linear-attention", "the state equals the cache of 64 tokens", "(d·dv = 2·t·d at t = dv/2)")


def test_ssm_state_and_hybrid_cache():
    d_model, expand, N = 4096, 2, 16
    state = d_model * expand * N
    per_token = 2 * 8 * 128
    assert (state, per_token, state // per_token) == (131072, 2048, 64)
    says("ssm-hybrids", "8,192 × 16 = 131,072 numbers", "2·8·128 = 2,048 numbers per token")
    d_inner, d_conv = d_model * expand, 4  # the short causal convolution keeps its last d_conv - 1 inputs
    conv = d_inner * (d_conv - 1)
    assert (conv, conv / state, state + conv, (state + conv) // per_token) == (24576, 0.1875, 155648, 76)
    assert d_inner * d_conv / state == 0.25  # a buffer of all d_conv inputs, as reference code keeps
    says(
        "ssm-hybrids",
        "8,192 × 3 = 24,576 numbers (+18.75 %",
        "buffer of all 4, +25 %",
        "Together 155,648 numbers: about 76 tokens",
        "(24,576 numbers, +18.75 %): 155,648 numbers, the KV cache of 76 tokens",
    )
    layers = 32
    assert (layers // 8) / layers == 1 / 8  # 1 attention layer in 8
    says("ssm-hybrids", "the KV cache is 1/8")


# --- sparse attention -------------------------------------------------------------------------------


def test_nsa_keys_per_query():
    t, l, d, l_sel, n, w = 65536, 32, 16, 64, 16, 512
    compressed = (t - l) // d + 1
    total = compressed + n * l_sel + w
    assert (compressed, n * l_sel, total) == (4095, 1024, 5631) and f"{total / t:.1%}" == "8.6%"
    says("native-sparse-attention", "4,095 summaries, 1,024 selected tokens and 512 local ones, 5,631 keys or 8.6 %")


def test_dsa_cost_ratio():
    k, t = 2048, 131072
    assert t // k == 64
    says("deepseek-sparse-attention", "with k = 2,048 at t = 131,072, to 1/64")


# --- serving -------------------------------------------------------------------------------------------


def test_continuous_batching_utilisation():
    lengths = [100, 200, 400, 800]
    busy, slots = sum(lengths), len(lengths) * max(lengths)
    assert (busy, slots, f"{busy / slots:.1%}") == (1500, 3200, "46.9%")
    says("continuous-batching", "use 1,500 of 3,200, 46.9 %")


def test_chunked_prefill_offset_mask():
    rng = np.random.default_rng(6)
    T, C, d = 12, 4, 3
    x = rng.normal(size=(T, d))
    full = causal_attention(x)
    pieces = []
    for j in range(T // C):
        queries = x[j * C : (j + 1) * C]
        keys = x[: (j + 1) * C]  # the cache so far plus this chunk
        offset = keys.shape[0] - queries.shape[0]  # K - Q = jC
        assert offset == j * C
        allowed = np.arange(keys.shape[0])[None, :] <= np.arange(C)[:, None] + offset
        s = np.where(allowed, queries @ keys.T / math.sqrt(d), -np.inf)
        w = np.exp(s - s.max(1, keepdims=True))
        pieces.append((w / w.sum(1, keepdims=True)) @ keys)
    np.testing.assert_allclose(np.concatenate(pieces), full, atol=1e-12)
    assert 8192 // 512 == 16
    says("chunked-prefill", "offset = K − Q with K = jC + C keys and Q = C", "chunks of 512 takes 16 steps")


# --- decode arithmetic intensity and MLA ----------------------------------------------------------------


def decode_step_counts(g: int, t: int, hd: int, b: int) -> tuple[int, int]:
    """FLOPs and bytes of one decode step for one K/V head serving g query heads, counted from the
    shapes of the two matrix-vector products."""
    k = np.zeros((t, hd))
    flops = g * (2 * k.size + 2 * k.size)  # scores q·K and weights·V
    return flops, 2 * k.size * b


def test_decode_intensity_by_group_size():
    for g in (1, 8, 32):
        for t, hd in ((100, 64), (4096, 128)):
            flops, bytes_read = decode_step_counts(g, t, hd, 2)
            assert flops / bytes_read == g == 2 * g / 2
    ridge = 1e15 / 3.35e12
    assert round(ridge) == 299
    says(
        "decode-intensity-group-size", "2g/b FLOP per byte", "in BF16 (b = 2) exactly g", "about 299 FLOP per byte", "GQA with g = 8 does 8"
    )


def test_mla_cache_bytes():
    d_c, d_r, heads, hd, layers = 512, 64, 128, 128, 61
    mla, mha = d_c + d_r, 2 * heads * hd
    assert (mla, mha, mla / (2 * hd)) == (576, 32768, 2.25)
    assert (mla * 2 * layers, mha * 2 * layers) == (70272, 3997696)
    assert f"{mla * 2 * layers / 1024:.1f}" == "68.6" and f"{mha * 2 * layers / 2**20:.1f}" == "3.8"
    says(
        "mla-latent-cache",
        "576 numbers",
        "2·128·128 = 32,768",
        "576 / (2·128) = 2.25 K/V heads",
        "576·2·61 = 70,272 bytes (about 68.6 KiB)",
        "3,997,696 bytes (about 3.8 MiB)",
    )


def test_mla_weight_absorption():
    rng = np.random.default_rng(7)
    d_c, hd, t = 6, 4, 5
    W_UK, W_UV = rng.normal(size=(hd, d_c)), rng.normal(size=(hd, d_c))
    c = rng.normal(size=(t, d_c))  # the cached latents
    q = rng.normal(size=hd)
    keys, values = c @ W_UK.T, c @ W_UV.T  # decompressed, the slow way
    np.testing.assert_allclose(keys @ q, c @ (W_UK.T @ q), atol=1e-12)
    p = rng.dirichlet(np.ones(t))
    np.testing.assert_allclose(p @ values, W_UV @ (p @ c), atol=1e-12)

    def rotation(pos: int) -> np.ndarray:
        blocks = [np.array([[math.cos(pos * f), -math.sin(pos * f)], [math.sin(pos * f), math.cos(pos * f)]]) for f in (1.0, 0.1)]
        return np.block([[blocks[0], np.zeros((2, 2))], [np.zeros((2, 2)), blocks[1]]])

    # with RoPE the matrix between q and c depends on the pair of positions: no single absorbed matrix
    between = [rotation(i).T @ rotation(j) @ W_UK for i, j in ((0, 1), (3, 4), (0, 2))]
    np.testing.assert_allclose(between[0], between[1], atol=1e-12)  # depends on j - i ...
    assert not np.allclose(between[0], between[2])  # ... and changes with it
    says("mla-weight-absorption", "(W_UK[h]ᵀ q_h)ᵀ c", "R_iᵀ R_j = R_{j−i}")


def test_mla_decode_intensity():
    heads, d_c, d_r = 128, 512, 64
    flops = heads * (2 * (d_c + d_r) + 2 * d_c)
    bytes_read = (d_c + d_r) * 2
    assert (flops, bytes_read, round(flops / bytes_read)) == (278528, 1152, 242)
    says(
        "mla-decode-intensity",
        "128·(1,152 + 1,024) = 278,528 FLOPs over 576·2 = 1,152 bytes",
        "about 242 FLOP per byte",
        "about 299 FLOP per byte",
    )
