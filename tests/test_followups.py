"""The follow-up exercises kv-cache, gqa, tiled-softmax and cross-attention.

Their references against independent computations (PyTorch's scaled_dot_product_attention for
kv-cache, gqa and cross-attention; a plain-loop softmax for tiled-softmax), the numbers printed in
their statements, the kv-cache cache counter on hand-made structures, exercise detection, the
follow-up list after an mha-screen pass, and the tiled-softmax memory check: a solution that
builds the T×S scores fails it although its values pass, while a differently written tiled
solution passes it. (Every reference passing and every bug file being diagnosed as itself is
tests/test_catalogue.py's job.)
"""

from __future__ import annotations

import ast
import math
import re
import textwrap

import numpy as np
import pytest

from attn_kit.base.harness import measure
from attn_kit.base.paths import solutions_dir
from attn_kit.base.records import Opaque, TensorValue
from attn_kit.checks import cross_attention as cross_checks
from attn_kit.checks import gqa as gqa_checks
from attn_kit.checks import kv_cache as kv_checks
from attn_kit.checks import tiled_softmax as tiled_checks
from attn_kit.checks.cases import gqa_params, params, repeat_kv_heads, tokens
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog, preflight

from conftest import attn_kit, check_json, need_torch

FOLLOW_UPS = ("kv-cache", "gqa", "tiled-softmax", "cross-attention")


def solution(exercise: str, name: str = "reference_numpy.py"):
    return load_module(str(solutions_dir(exercise) / name))


def refs(exercise: str):
    names = ["reference_numpy.py"] + (["reference_lists.py"] if exercise != "tiled-softmax" else [])
    return [(name, solution(exercise, name)) for name in names]


def as_lists(p: dict) -> dict:
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in p.items()}


@pytest.fixture(scope="module")
def torch():
    return need_torch()  # CI installs torch: a missing torch fails there instead of skipping


def torch_attention(torch, x, p, num_heads, mask=None, context=None, num_kv_heads=None):
    """(out B×T×D, weights B×H×T×S) computed with torch: projections, then
    scaled_dot_product_attention (enable_gqa for fewer K/V heads) for the values and torch.softmax
    for the weights. Only 'a query with no allowed key gives zeros' is applied by hand."""
    F = torch.nn.functional

    def t(a):
        return torch.tensor(np.asarray(a, dtype=np.float64))

    x = t(x)
    c = x if context is None else t(context)
    B, T, D = x.shape
    S = c.shape[1]
    H, KV = num_heads, num_kv_heads or num_heads
    hd = D // H

    def proj(inp, w, b):
        y = inp @ t(p[w])
        return y + t(p[b]) if p.get(b) is not None else y

    q = proj(x, "Wq", "bq").view(B, T, H, hd).transpose(1, 2)
    k = proj(c, "Wk", "bk").view(B, S, KV, hd).transpose(1, 2)
    v = proj(c, "Wv", "bv").view(B, S, KV, hd).transpose(1, 2)
    allowed = torch.ones(B, 1, T, S, dtype=torch.bool) if mask is None else torch.tensor(np.asarray(mask, bool))[:, None]
    empty = ~allowed.any(-1, keepdim=True)
    safe = allowed | empty
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=safe, enable_gqa=KV != H)
    heads = torch.where(empty, torch.zeros_like(heads), heads)
    k_full = k.repeat_interleave(H // KV, dim=1)
    weights = torch.softmax((q @ k_full.transpose(-1, -2) / math.sqrt(hd)).masked_fill(~safe, float("-inf")), -1)
    weights = torch.where(empty, torch.zeros_like(weights), weights)
    out = heads.transpose(1, 2).reshape(B, T, D) @ t(p["Wo"])
    if p.get("bo") is not None:
        out = out + t(p["bo"])
    return out.numpy(), weights.numpy()


def random_mask(rng, B, T, S):
    mask = rng.random((B, T, S)) < 0.6
    mask[:, 0] = False  # one query with no allowed key
    return mask


# --- references against independent computations ----------------------------------------------------


@pytest.mark.parametrize("name", ["reference_numpy.py", "reference_lists.py"])
def test_kv_cache_decoding_equals_torch_causal_attention(torch, name):
    module = solution("kv-cache", name)
    rng = np.random.default_rng(11)
    for B, T, D, H, big in ((2, 5, 8, 2, False), (1, 4, 6, 3, True), (3, 3, 4, 1, False)):
        x = tokens(rng, B, T, D, scale=25.0 if big else 1.0)
        p = params(rng, D, biases=not big, scale=3.0 if big else 1.0)
        expected, _ = torch_attention(torch, x, p, H, np.tril(np.ones((T, T), bool))[None].repeat(B, 0))
        cache = None
        for t in range(T):
            x_t = x[:, t] if name.endswith("numpy.py") else x[:, t].tolist()
            out_t, cache = module.decode_step(x_t, p if name.endswith("numpy.py") else as_lists(p), H, cache)
            np.testing.assert_allclose(np.asarray(out_t), expected[:, t], rtol=1e-9, atol=1e-9)
            assert kv_checks.cached_numbers(cache) == (2 * B * (t + 1) * D, "")


@pytest.mark.parametrize("name", ["reference_numpy.py", "reference_lists.py"])
def test_gqa_equals_torch_enable_gqa(torch, name):
    module = solution("gqa", name)
    rng = np.random.default_rng(12)
    for B, T, D, H, KV in ((2, 4, 8, 4, 2), (1, 5, 12, 6, 3), (2, 3, 8, 4, 1), (1, 3, 4, 2, 2)):
        x, p = tokens(rng, B, T, D), gqa_params(rng, D, H, KV)
        mask = random_mask(rng, B, T, T)
        expected = torch_attention(torch, x, p, H, mask, num_kv_heads=KV)
        args = (x, p, H, KV, mask) if name.endswith("numpy.py") else (x.tolist(), as_lists(p), H, KV, mask.tolist())
        out, weights = module.grouped_query_attention(*args, return_weights=True)
        np.testing.assert_allclose(np.asarray(out), expected[0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(np.asarray(weights), expected[1], rtol=1e-9, atol=1e-12)


def test_gqa_repeated_kv_builder_matches_torch_repeat_interleave(torch):
    """The checks' expected values use cases.repeat_kv_heads with mha-screen's reference; that
    must be the same thing as torch's enable_gqa."""
    rng = np.random.default_rng(13)
    x, p = tokens(rng, 2, 4, 8), gqa_params(rng, 8, 4, 2)
    mha = solution("mha-screen")
    out, weights = mha.multi_head_attention(x, repeat_kv_heads(p, 4, 2), 4, None, return_weights=True)
    expected = torch_attention(torch, x, p, 4, None, num_kv_heads=2)
    np.testing.assert_allclose(out, expected[0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weights, expected[1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["reference_numpy.py", "reference_lists.py"])
def test_cross_attention_equals_torch(torch, name):
    module = solution("cross-attention", name)
    rng = np.random.default_rng(14)
    for B, T, S, D, H in ((2, 3, 5, 8, 2), (1, 6, 2, 6, 3), (2, 1, 4, 4, 4)):
        x, c, p = tokens(rng, B, T, D), tokens(rng, B, S, D), params(rng, D)
        mask = random_mask(rng, B, T, S)
        expected = torch_attention(torch, x, p, H, mask, context=c)
        args = (x, c, p, H, mask) if name.endswith("numpy.py") else (x.tolist(), c.tolist(), as_lists(p), H, mask.tolist())
        out, weights = module.cross_attention(*args, return_weights=True)
        assert np.shape(weights) == (B, H, T, S)
        np.testing.assert_allclose(np.asarray(out), expected[0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(np.asarray(weights), expected[1], rtol=1e-9, atol=1e-12)


def loop_attention(q, k, v, mask=None):
    """Naive masked softmax attention with plain loops and math.exp (max subtracted)."""
    (T, d), (S, dv) = np.shape(q), np.shape(v)
    out = []
    for i in range(T):
        keys = [j for j in range(S) if mask is None or mask[i][j]]
        if not keys:
            out.append([0.0] * dv)
            continue
        s = [sum(q[i][a] * k[j][a] for a in range(d)) / math.sqrt(d) for j in keys]
        top = max(s)
        e = [math.exp(x - top) for x in s]
        z = sum(e)
        out.append([sum(w * v[j][c] for w, j in zip(e, keys)) / z for c in range(dv)])
    return np.array(out)


@pytest.mark.parametrize("block_size", [1, 3, 4, 7, 10, 64])
def test_tiled_reference_equals_loop_attention(block_size):
    tiled = solution("tiled-softmax")
    rng = np.random.default_rng(15)
    q, k, v = rng.normal(size=(7, 5)), rng.normal(size=(10, 5)), rng.normal(size=(10, 3))
    mask = rng.random((7, 10)) < 0.5
    mask[2] = False  # nothing allowed
    mask[4, :8] = False  # only the last keys allowed
    mask[4, 9] = True
    for m in (mask, None):
        np.testing.assert_allclose(
            tiled.tiled_attention(q, k, v, m, block_size), loop_attention(q.tolist(), k.tolist(), v.tolist(), m), rtol=1e-12, atol=1e-12
        )
    big_q, big_k = q * 30, k * 30  # scores in the hundreds to thousands
    got = tiled.tiled_attention(big_q, big_k, v, mask, block_size)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, loop_attention(big_q.tolist(), big_k.tolist(), v.tolist(), mask), rtol=1e-9, atol=1e-12)


def test_tiled_checks_naive_attention_is_loop_attention():
    rng = np.random.default_rng(16)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    mask = rng.random((4, 6)) < 0.5
    mask[1] = False
    np.testing.assert_allclose(
        tiled_checks.naive_attention(q, k, v, mask), loop_attention(q.tolist(), k.tolist(), v.tolist(), mask), rtol=1e-12, atol=1e-12
    )


def test_tiled_reference_memory_stays_within_the_bound():
    """Measured the way the check measures (tracemalloc from the start of the call)."""
    tiled = solution("tiled-softmax")
    rng = np.random.default_rng(17)
    T, d, bs = 2048, 32, 64
    q, k, v = (rng.normal(size=(T, d)) for _ in range(3))
    mask = rng.random((T, T)) < 0.6
    _, extra = measure(tiled.tiled_attention, q, k, v, mask, bs)
    bound = tiled_checks.memory_bound(T, bs, d)
    assert 0 < extra["peak_bytes"] <= bound, (extra["peak_bytes"], bound)
    assert bound < 8 * T * T / 2  # a T×S float64 matrix could never fit in it
    # the diagnosis's replay of the memory check, on the reference and on the bug that builds T×S
    assert tiled_checks.replay_peak_over_bound(tiled, q, k, v, mask, bs) == [0.0]
    assert tiled_checks.replay_peak_over_bound(solution("tiled-softmax", "bugs/materialises-scores.py"), q, k, v, mask, bs) == [1.0]


# --- the statements' worked examples -------------------------------------------------------------------


def statement(exercise_id: str) -> str:
    return catalog.exercise(exercise_id).statement


def literal_after(text: str, label: str):
    """The first `[...]` literal in backticks after label, e.g. 'Output: `[[1, 2]]`'."""
    match = re.search(re.escape(label) + r"\s*`(\[[^`]*\])`", text)
    assert match, f"no `{label}` literal in the statement"
    return ast.literal_eval(match.group(1))


def block_literals(text: str) -> dict:
    """name -> value for the `name = [...]` lines of the statement's indented example block."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"\s{4}(\w+)\s*=\s*(\[.*\])\s*(#.*)?$", line)
        if match:
            found[match.group(1)] = ast.literal_eval(match.group(2))
    return found


def test_kv_cache_statement_example():
    text = statement("kv-cache")
    given = block_literals(text)
    assert given["x"] == kv_checks.PUBLIC_X
    for name in ("Wk", "Wv", "bo"):
        assert given[name] == kv_checks.PUBLIC_PARAMS[name]
    rows = re.findall(r"^\| (\d)[^|]*\| `(\[\[.*?\]\])` \| `(\[\[.*?\]\])` \| (\d+) \|$", text, re.MULTILINE)
    assert len(rows) == 3
    p = {k: np.array(v) for k, v in kv_checks.PUBLIC_PARAMS.items()}
    cache = None
    for t, x_t, out_t, size in rows:
        assert ast.literal_eval(x_t) == [kv_checks.PUBLIC_X[0][int(t)]]
        got, cache = solution("kv-cache").decode_step(ast.literal_eval(x_t), p, 2, cache)
        np.testing.assert_allclose(got, ast.literal_eval(out_t), atol=5e-7)
        assert kv_checks.cached_numbers(cache)[0] == int(size)


def test_gqa_statement_example():
    text = statement("gqa")
    given = block_literals(text)
    assert given["x"] == gqa_checks.PUBLIC_X
    for name in ("Wk", "Wv", "bo"):
        assert given[name] == gqa_checks.PUBLIC_PARAMS[name]
    p = {k: np.array(v) for k, v in gqa_checks.PUBLIC_PARAMS.items()}
    out, weights = solution("gqa").grouped_query_attention(np.array(given["x"]), p, 2, 1, np.tril(np.ones((3, 3), bool))[None], True)
    np.testing.assert_allclose(out[0], literal_after(text, "Output:"), atol=5e-7)
    np.testing.assert_allclose(weights[0, 0], literal_after(text, "Weights, head 0:"), atol=5e-7)
    np.testing.assert_allclose(weights[0, 1], literal_after(text, "head 1:"), atol=5e-7)


def test_tiled_statement_example():
    text = statement("tiled-softmax")
    given = block_literals(text)
    assert (given["q"], given["k"], given["v"], given["mask"]) == (
        tiled_checks.PUBLIC_Q,
        tiled_checks.PUBLIC_K,
        tiled_checks.PUBLIC_V,
        tiled_checks.PUBLIC_MASK,
    )
    out = solution("tiled-softmax").tiled_attention(
        np.array(given["q"]), np.array(given["k"]), np.array(given["v"]), np.array(given["mask"]), 2
    )
    np.testing.assert_allclose(out, literal_after(text, "Output:"), atol=5e-7)
    # the narrated running values for query 0
    s = np.array(given["q"][0]) @ np.array(given["k"]).T / math.sqrt(2)
    l1 = np.exp(s[:2] - s[0]).sum()
    alpha = math.exp(s[0] - s[2])
    for number in (f"{l1:.6f}", f"{alpha:.6f}", f"{l1 * alpha + 1:.6f}"):
        assert number in text


def test_cross_attention_statement_example():
    text = statement("cross-attention")
    given = block_literals(text)
    assert given["x"] == cross_checks.PUBLIC_X and given["context"] == cross_checks.PUBLIC_CONTEXT
    assert given["mask"] == cross_checks.PUBLIC_MASK
    p = {k: np.array(v) for k, v in cross_checks.PUBLIC_PARAMS.items()}
    out, weights = solution("cross-attention").cross_attention(
        np.array(given["x"]), np.array(given["context"]), p, 2, np.array(given["mask"]), True
    )
    np.testing.assert_allclose(out[0], literal_after(text, "Output:"), atol=5e-7)
    np.testing.assert_allclose(weights[0, 0], literal_after(text, "Weights, head 0:"), atol=5e-7)
    np.testing.assert_allclose(weights[0, 1], literal_after(text, "head 1:"), atol=5e-7)


# --- the kv-cache counter ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cache, expected",
    [
        (None, 0),
        ((np.zeros((2, 3, 4)), np.zeros((2, 3, 4))), 48),
        ({"k": [[[1.0, 2.0]], [[3.0, 4.0]]], "v": [[[1.0, 2.0]], [[3.0, 4.0]]]}, 8),
        ({"k": np.zeros((1, 2, 2), dtype=np.float32), "v": [[0.5, 1.5]], "length": 2, "name": "cache"}, 6),
        ([1, 2, True, "x", None, np.arange(6)], 0),  # ints, bools, strings, int arrays
        ([(np.ones(3), [1.0, [2.0, {"deep": 3.0}]])], 6),  # any nesting
        (np.array([[1.0, 2.0], [3.0, 4.0]], dtype=object), 4),  # object arrays are walked
        (TensorValue(np.zeros((2, 2)), "torch.float32", "cpu", (2, 2)), 4),
    ],
)
def test_cached_numbers_counts_floats_only(cache, expected):
    assert kv_checks.cached_numbers(cache) == (expected, "")


def test_cached_numbers_names_what_it_cannot_open():
    n, problem = kv_checks.cached_numbers({"k": np.zeros(4), "extra": Opaque("KVCache")})
    assert n == 4 and "KVCache" in problem


def test_kv_cache_object_cache_gets_a_clear_message(tmp_path):
    path = tmp_path / "kv.py"
    path.write_text(
        textwrap.dedent("""\
        # attn-kit: kv-cache
        class KVCache:
            def __init__(self):
                self.keys = []

        def decode_step(x_t, params, num_heads, cache=None):
            cache = cache or KVCache()
            return [[0.0] * len(row) for row in x_t], cache
        """)
    )
    data, code = check_json(path, "--seed", "3")
    assert code == 1
    first = data["checks"][0]
    assert first["id"] == "step-returns-output-and-cache" and first["status"] == "fail"
    assert "KVCache object" in first["message"] and "lists, tuples, dicts and arrays" in first["message"]


# --- the tiled-softmax memory check on candidates the kit has never seen ------------------------------

NAIVE = """\
import numpy as np


def tiled_attention(q, k, v, mask=None, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be positive")
    scores = q @ k.T / np.sqrt(q.shape[1])            # T×S: right values, O(T·S) memory
    if mask is None:
        mask = np.ones(scores.shape, dtype=bool)
    top = np.where(mask, scores, -np.inf).max(axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask, np.exp(scores - top), 0.0)
    z = e.sum(axis=1, keepdims=True)
    return e @ v / np.where(z > 0, z, 1.0)
"""

QUERY_BLOCKED = '''\
import numpy as np


def tiled_attention(q, k, v, mask=None, block_size=64):
    """Written differently from the kit's reference: plain (not in-place) arithmetic, a list of
    per-block results, and the mask sliced per block."""
    if block_size < 1:
        raise ValueError("block_size must be positive")
    T, S, dv = q.shape[0], k.shape[0], v.shape[1]
    m = np.full((T, 1), -np.inf)
    l = np.zeros((T, 1))
    acc = np.zeros((T, dv))
    for j in range(0, S, block_size):
        s = q @ k[j:j + block_size].T / np.sqrt(q.shape[1])
        if mask is not None:
            s = np.where(mask[:, j:j + block_size], s, -np.inf)
        new_m = np.maximum(m, s.max(axis=1, keepdims=True))
        safe = np.where(np.isinf(new_m), 0.0, new_m)
        p = np.exp(s - safe)
        scale = np.exp(m - safe)
        l = l * scale + p.sum(axis=1, keepdims=True)
        acc = acc * scale + p @ v[j:j + block_size]
        m = new_m
    return np.divide(acc, l, out=np.zeros_like(acc), where=l > 0)
'''


@pytest.mark.slow
def test_memory_check_fails_a_materialising_solution_whose_values_pass(tmp_path):
    path = tmp_path / "naive.py"
    path.write_text(NAIVE)
    data, code = check_json(path, "--seed", "5")
    assert code == 1 and data["exercise"] == "tiled-softmax"
    failing = {c["id"]: c for c in data["checks"] if c["status"] != "pass"}
    assert list(failing) == ["memory-stays-within-bound"], failing
    message = failing["memory-stays-within-bound"]["message"]
    peak = float(re.search(r"peak ([\d.]+) MiB", message).group(1))
    assert peak > 6.0 and "8·T·S = 32 MiB" in message and "bound 64·T·(block_size + dv) = 6.00 MiB" in message
    assert [d["bug"] for d in data["diagnosis"]] == ["materialises-scores"]


def test_memory_check_passes_a_differently_written_tiled_solution(tmp_path):
    path = tmp_path / "tiled.py"
    path.write_text(QUERY_BLOCKED)
    data, code = check_json(path, "--seed", "5")
    assert code == 0, [(c["id"], c["message"]) for c in data["checks"] if c["status"] != "pass"]


# --- wiring ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise_id", FOLLOW_UPS)
def test_exercise_detected_from_the_functions_a_file_defines(exercise_id, tmp_path):
    exercise = catalog.exercise(exercise_id)
    path = tmp_path / "solution.py"
    path.write_text(f"def {exercise.signature_of(exercise.main)}:\n    return None\n")
    assert preflight.detect_exercise(preflight.read_source(path)).id == exercise_id


def test_list_shows_the_follow_ups_and_mha_screen_offers_them():
    listing = attn_kit("list").stdout
    for exercise_id in ("mha-screen", *FOLLOW_UPS):
        assert exercise_id in listing
    assert len(catalog.exercises()) >= 6
    proc = attn_kit("check", solutions_dir("mha-screen") / "reference_numpy.py", "--seed", "1")
    assert proc.returncode == 0
    for exercise_id in FOLLOW_UPS:
        assert f"attn-kit start {exercise_id} {exercise_id.replace('-', '_')}.py" in proc.stdout


def test_the_diagnosis_replays_a_decoding_loop():
    """replay_decoding, how the diagnosis reruns a decoding loop on the kit's implementations,
    agrees with causal attention over the whole sequence and counts the cache as the check does."""
    rng = np.random.default_rng(18)
    x, p = tokens(rng, 2, 4, 8), params(rng, 8)
    outs, sizes = kv_checks.replay_decoding(solution("kv-cache"), x, p, 2)
    np.testing.assert_allclose(outs, kv_checks.causal_rows(x, p, 2), rtol=1e-12, atol=1e-12)
    assert sizes == [2 * 2 * t * 8 for t in range(1, 5)]
    _, bad_sizes = kv_checks.replay_decoding(solution("kv-cache", "bugs/cache-grows-quadratically.py"), x, p, 2)
    assert bad_sizes == [2 * 2 * 8 * t * (t + 1) / 2 for t in range(1, 5)]
