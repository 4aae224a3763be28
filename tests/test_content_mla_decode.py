"""mla-decode's content recomputed: every figure of its statement (the worked example, the cache
count, the memory bound), of its questions, and the agreement of the statement's example with the
suite's own inputs. The expected values come from the suite's naive, per-head up-projected layer
and from the absorbed reference, which must agree."""

from __future__ import annotations

import ast
import math
import re

import numpy as np

from attn_kit.base.paths import solutions_dir
from attn_kit.checks import mla_decode as suite
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog

EXERCISE = catalog.exercise("mla-decode")
TEXT = EXERCISE.statement
REFERENCE = load_module(str(solutions_dir("mla-decode") / "reference_numpy.py"))


def near(got, want, places=6):
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), atol=0.6 * 10**-places, rtol=0)


def block_value(name: str):
    """`name = [...]` (or identity(n)) from the statement's example block; lists may span lines."""
    match = re.search(rf"^\s+{re.escape(name)}\s*=\s*(identity\(\d+\)|\[.*?\]\])(?=\s*(?:c = |k_R = |$))", TEXT, re.MULTILINE | re.DOTALL)
    source = match.group(1)
    if source.startswith("identity"):
        return np.eye(int(source[9:-1]))
    return np.array(ast.literal_eval(source), dtype=float)


def question(question_id: str) -> catalog.Question:
    return next(q for q in EXERCISE.questions if q.id == question_id)


def decode(module, x, p, H, positions):
    cache, outs = None, []
    for t, pos in enumerate(positions):
        out, cache = module.mla_decode_step(x[:, t], p, H, pos, cache)
        outs.append(out)
    return np.stack(outs, axis=1), cache


# --- the worked example ------------------------------------------------------------------------


def test_mla_worked_example_inputs_are_the_public_checks():
    x = block_value("x")
    assert x.tolist() == suite.WORKED_X
    for name, value in suite.WORKED_PARAMS.items():
        assert block_value(name).tolist() == value, name


def test_mla_worked_example_table_is_the_naive_layer_row_by_row():
    x, p = np.array(suite.WORKED_X, float), {k: np.array(v, float) for k, v in suite.WORKED_PARAMS.items()}
    naive = suite.naive_mla(x, p, 2, range(3))
    absorbed, _ = decode(REFERENCE, x, p, 2, range(3))
    near(absorbed, naive, places=12)
    rows = re.findall(r"^\| (\d) [^|]*\| `([^`]*)` \| `([^`]*)` \| (\d+) \|$", TEXT, re.MULTILINE)
    assert len(rows) == 3
    d_c, d_R = p["W_dkv"].shape[1], p["W_kr"].shape[1]
    for step, x_t, out_t, count in rows:
        t = int(step)
        near(ast.literal_eval(x_t), x[:, t])
        near(ast.literal_eval(out_t), naive[:, t])
        assert int(count) == 1 * (t + 1) * (d_c + d_R)  # B·t·(d_c + d_R) after t + 1 calls


def test_mla_worked_example_step_one_figures():
    x, p = np.array(suite.WORKED_X, float), {k: np.array(v, float) for k, v in suite.WORKED_PARAMS.items()}
    _, cache = decode(REFERENCE, x[:, :2], p, 2, range(2))
    step = TEXT[TEXT.index("At step 1") :]
    latents = re.search(r"c = `(\[.*?\])` and `(\[.*?\])`", step)
    near([ast.literal_eval(latents.group(1)), ast.literal_eval(latents.group(2))], cache["c_kv"][0])
    keys = re.search(r"k_R = `(\[.*?\])` \(position 0\) and\s+`(\[.*?\])` \(position 1\)", step)
    near([ast.literal_eval(keys.group(1)), ast.literal_eval(keys.group(2))], cache["k_rope"][0])
    q_r = suite.rotate(np.array([[0.0, 1.0]]), [1])[0]
    near(ast.literal_eval(re.search(r"rope\(\[0, 1\], 1\) =\s+`(\[.*?\])`", step).group(1)), q_r)
    against = [q_r @ cache["k_rope"][0, 0], q_r @ cache["k_rope"][0, 1]]
    scores = re.search(r"scores `(-?[\d.]+)` against token 0's key and `(-?[\d.]+)` against", step)
    near([float(scores.group(1)), float(scores.group(2))], against)
    for head, nope in ((0, [0.0, 0.0]), (1, [0.0, 4.0])):  # q_nope·c_j[head]: 0 for head 0; 2·[0, 2] for head 1
        s = (np.array(nope) + against) / math.sqrt(3)
        w = np.exp(s - s.max())
        w /= w.sum()
        label = f"Head {head} (q_nope" if head == 0 else f"head {head} (q_nope"
        part = step[step.index(label) :]
        stated = re.search(r"scores `(\[.*?\]) / sqrt\(3\)` → weights\s+`(\[.*?\])`", part)
        near(ast.literal_eval(stated.group(1)), np.array(nope) + against)
        near(ast.literal_eval(stated.group(2)), w)
    near(float(re.search(r"outputs 0\.256703·1 \+ (0\.743297)·0", step).group(1)), 1 - 0.256703)
    head1 = re.search(r"outputs\s+4 · ([\d.]+) = ([\d.]+)", step)
    s1 = (np.array([0.0, 4.0]) + against) / math.sqrt(3)
    w1 = np.exp(s1 - s1.max()) / np.exp(s1 - s1.max()).sum()
    near(float(head1.group(1)), w1[1], places=8)
    near(float(head1.group(2)), 4 * w1[1])


# --- the cache and the memory bound --------------------------------------------------------------


def test_mla_memory_bound_figures_match_the_check():
    m = suite.MEMORY
    stated = re.search(
        r"t = ([\d,]+) cached tokens, B = (\d+), D = (\d+), H = (\d+), d_c = (\d+), d_R = (\d+) and d_nope = d_v = (\d+)",
        " ".join(TEXT.split()),
    )
    t, B, D, H, d_c, d_R, width = (int(v.replace(",", "")) for v in stated.groups())
    assert (t, B, D, H, d_c, d_R, width, width) == (m["t"], m["B"], m["D"], m["H"], m["d_c"], m["d_R"], m["d_nope"], m["d_v"])
    bound = suite.memory_bound(B, t, d_c, d_R, H)
    flat = " ".join(TEXT.split())
    assert bound == 64 * B * t * (d_c + d_R + H) and bound / 2**20 == 3.5
    assert "64·B·t·(d_c + d_R + H) bytes = 3.5 MiB" in flat
    one_head, every_head = 8 * B * t * width, 8 * B * t * H * (width + width)
    assert one_head / 2**20 == 8.0 and "of a single head over the cache are 8 MiB in float64" in flat
    assert every_head / 2**20 == 64.0 and "every head's keys and values, 64 MiB" in flat
    assert one_head > bound  # up-projecting head by head breaks the bound too


def test_mla_reference_stays_within_the_memory_bound_and_the_naive_form_does_not():
    from attn_kit.base.harness import measure

    m = suite.MEMORY
    d = suite.Dims(B=m["B"], D=m["D"], H=m["H"], d_c=m["d_c"], d_R=m["d_R"], d_nope=m["d_nope"], d_v=m["d_v"])
    rng = np.random.default_rng(0)
    x, p = suite.tokens(rng, d.B, m["t"] + 1, d.D), suite.mla_params(rng, d)
    c, k = suite.latent_cache(x[:, : m["t"]], p, range(m["t"]))
    bound = suite.memory_bound(d.B, m["t"], d.d_c, d.d_R, d.H)
    args = (x[:, m["t"]], p, d.H, m["t"], {"c_kv": c, "k_rope": k})
    _, good = measure(REFERENCE.mla_decode_step, *args)
    naive = load_module(str(solutions_dir("mla-decode") / "bugs" / "keys-up-projected-per-step.py"))
    _, bad = measure(naive.mla_decode_step, *args)
    assert good["peak_bytes"] < bound / 2 < bound < bad["peak_bytes"]


def test_mla_reference_cache_holds_dc_plus_dr_numbers_per_token():
    rng = np.random.default_rng(3)
    d = suite.Dims(B=3, D=6, H=3, d_c=5, d_R=4, d_nope=2, d_v=3)
    x, p = suite.tokens(rng, d.B, 4, d.D), suite.mla_params(rng, d)
    _, cache = decode(REFERENCE, x, p, d.H, range(7, 11))
    assert set(cache) == {"c_kv", "k_rope"}
    assert sum(np.size(v) for v in cache.values()) == d.B * 4 * (d.d_c + d.d_R)


# --- the questions -------------------------------------------------------------------------------


def test_mla_cache_size_question():
    text = " ".join(question("mla-cache-size").key_points) + question("mla-cache-size").answer
    d_c, d_R, heads, width, layers = 512, 64, 128, 128, 61
    per_layer = d_c + d_R
    assert per_layer == 576 and "576 numbers" in text
    assert per_layer * layers == 35_136 and "35,136 numbers" in text
    assert per_layer * layers * 2 == 70_272 and "70,272 bytes" in text
    assert round(70_272 / 1024, 1) == 68.6 and "68.6 KiB" in text
    mha = 2 * heads * width
    assert mha == 32_768 and "32,768" in text
    assert round(mha / per_layer, 1) == 56.9 and "56.9 times" in text
    assert per_layer / (2 * width) == 2.25 and "2.25 K/V heads" in text


def test_mla_absorption_question():
    text = " ".join(question("mla-absorption").key_points) + question("mla-absorption").answer
    d_c, d_R, d_nope, d_v = 512, 64, 128, 128
    naive, absorbed = d_c * (d_nope + d_v), 2 * d_c + d_R
    assert naive == 131_072 and "131,072" in text
    assert absorbed == 1_088 and "1,088" in text
    assert round(naive / absorbed) == 120 and "120 times fewer" in text


def test_mla_decoupled_rope_question():
    """The key point: q_R(p)·k_R(j) depends only on p − j (the suite's rotation, any shift)."""
    assert "depends only on p − j" in " ".join(question("mla-decoupled-rope").key_points)
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(1, 8)), rng.normal(size=(1, 8))
    for p, j, shift in ((5, 2, 100), (9, 0, 37)):
        a = suite.rotate(q, [p]) @ suite.rotate(k, [j]).T
        b = suite.rotate(q, [p + shift]) @ suite.rotate(k, [j + shift]).T
        near(a, b, places=9)


def test_mla_arithmetic_intensity_question():
    text = " ".join(question("mla-arithmetic-intensity").key_points) + question("mla-arithmetic-intensity").answer
    d_c, d_R, heads = 512, 64, 128
    cache_bytes = (d_c + d_R) * 2
    macs = heads * (2 * d_c + d_R)
    assert cache_bytes == 1_152 and "1,152 bytes" in text
    assert macs == 139_264 and "139,264 multiply-adds" in text
    assert 2 * macs == 278_528 and "278,528 FLOPs" in text
    assert round(2 * macs / cache_bytes) == 242 and "242 FLOPs per byte" in text
    d_h = 128
    assert (4 * d_h) / (4 * d_h) == 1 and "about 1 FLOP per byte" in text
