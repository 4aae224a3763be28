"""mha-masked-bias: the references against independent torch computations, the worked example,
gradients, the NaN-gradient variant, NumPy solutions (values only) and life without torch.

The independent computations share no code with the references: heads are taken by slicing the
weight columns, attention comes from torch.nn.functional.scaled_dot_product_attention (weights
read out by attending over an identity matrix of values) and from multi_head_attention_forward,
whose boolean masks mean "ignore". In CI (CI=true) a missing torch fails these tests instead of
skipping them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import need_torch  # noqa: E402

torch = need_torch()  # CI installs torch; a missing torch fails there instead of skipping
F = torch.nn.functional

from attn_kit.base.errors import INSTALL  # noqa: E402
from attn_kit.base.paths import solutions_dir  # noqa: E402
from attn_kit.base.torch_support import grads  # noqa: E402
from attn_kit.diagnosis.diagnose import load_module  # noqa: E402
from attn_kit.grading import pipeline  # noqa: E402

from helpers import attn_kit, graded_json  # noqa: E402

SOLUTIONS = solutions_dir("mha-masked-bias")
REF_TORCH = load_module(str(SOLUTIONS / "reference_torch.py"))
REF_NUMPY = load_module(str(SOLUTIONS / "reference_numpy.py"))
GRADIENT_CHECKS = {"gradients-match-reference", "gradients-finite-on-masked-rows"}


# --- an independent computation -------------------------------------------------------------


def random_case(rng, B=None, Q=None, K=None, H=None, D=None, Dv=None, empty_rows=True):
    B, Q, K, H = (B or int(rng.integers(1, 4)), Q or int(rng.integers(1, 6)), K or int(rng.integers(1, 6)), H or int(rng.integers(1, 4)))
    D, Dv = D or int(rng.integers(1, 5)), Dv or int(rng.integers(1, 5))
    Cq, Cctx, Cout = (int(n) for n in rng.integers(1, 6, size=3))
    acts = {"query": rng.normal(size=(B, Q, Cq)), "context": rng.normal(size=(B, K, Cctx))}
    bias_shape = [None, (Q, K), (H, 1, K), (B, H, Q, K), (B, 1, Q, K)][int(rng.integers(5))]
    if bias_shape:
        acts["bias"] = rng.normal(size=bias_shape)
    params = {
        "w_q": rng.normal(size=(Cq, H * D)),
        "w_k": rng.normal(size=(Cctx, H * D)),
        "w_v": rng.normal(size=(Cctx, H * Dv)),
        "w_o": rng.normal(size=(H * Dv, Cout)),
    }
    if rng.random() < 0.7:
        params.update(b_q=rng.normal(size=H * D), b_k=rng.normal(size=H * D), b_v=rng.normal(size=H * Dv), b_o=rng.normal(size=Cout))
    p_allow = 0.6 if empty_rows else 1.0
    masks = {}
    if rng.random() < 0.7:
        masks["key_mask"] = rng.random((B, K)) < p_allow + 0.2
    if rng.random() < 0.5:
        masks["query_mask"] = rng.random((B, Q)) < p_allow + 0.3
    if rng.random() < 0.5:
        masks["attention_mask"] = rng.random((B, H, Q, K)) < p_allow + 0.2
    causal = bool(rng.random() < 0.4) and empty_rows
    offset = int(rng.integers(-1, 3)) if causal else 0
    return acts, params, masks, {"heads": H, "causal": causal, "causal_offset": offset}


def independent(acts, params, masks, heads, causal, causal_offset):
    """(output, attention) from scaled_dot_product_attention; empty rows zeroed by hand."""
    t = {k: torch.as_tensor(v, dtype=torch.float64) for k, v in {**acts, **params}.items()}
    x, ctx = t["query"], t["context"]
    B, Q, _ = x.shape
    K, H = ctx.shape[1], heads
    D, Dv = t["w_q"].shape[1] // H, t["w_v"].shape[1] // H

    def head(inputs, w, b, h, width):
        cols = slice(h * width, (h + 1) * width)
        y = inputs @ t[w][:, cols]
        return y + t[b][cols] if b in t else y

    q = torch.stack([head(x, "w_q", "b_q", h, D) for h in range(H)], dim=1)  # B,H,Q,D
    k = torch.stack([head(ctx, "w_k", "b_k", h, D) for h in range(H)], dim=1)
    v = torch.stack([head(ctx, "w_v", "b_v", h, Dv) for h in range(H)], dim=1)
    allowed = torch.ones(B, H, Q, K, dtype=torch.bool)
    for name, index in (("key_mask", (slice(None), None, None, slice(None))), ("query_mask", (slice(None), None, slice(None), None))):
        if masks.get(name) is not None:
            allowed &= torch.as_tensor(masks[name])[index]
    if masks.get("attention_mask") is not None:
        allowed &= torch.as_tensor(masks["attention_mask"])
    if causal:
        allowed &= torch.ones(Q, K, dtype=torch.bool).tril(causal_offset)
    empty = ~allowed.any(-1, keepdim=True)
    safe = allowed | empty  # SDPA would give NaN on empty rows
    additive = torch.zeros(B, H, Q, K, dtype=torch.float64).masked_fill(~safe, float("-inf"))
    if "bias" in t:
        additive = additive + t["bias"]
    summary = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)  # scale 1/sqrt(D)
    weights = F.scaled_dot_product_attention(q, k, torch.eye(K, dtype=torch.float64).expand(B, H, K, K), attn_mask=additive)
    summary = summary.masked_fill(empty, 0.0)
    weights = weights.masked_fill(empty, 0.0)
    out = torch.cat(summary.unbind(1), dim=-1) @ t["w_o"]
    if "b_o" in t:
        out = out + t["b_o"]
    dead = empty.all(dim=1)  # B,Q,1: no key in any head
    return out.masked_fill(dead, 0.0), weights


def as_tensors(acts, params, masks, dtype=torch.float64):
    floats = {k: torch.tensor(v, dtype=dtype) for k, v in {**acts, **params}.items()}
    return ({k: floats[k] for k in acts}, {k: floats[k] for k in params}, {k: torch.tensor(v) for k, v in masks.items()})


# --- the references -------------------------------------------------------------------------


def test_references_match_scaled_dot_product_attention_on_random_cases():
    rng = np.random.default_rng(404)
    for _ in range(60):
        acts, params, masks, kw = random_case(rng)
        expected_out, expected_w = (t.numpy() for t in independent(acts, params, masks, **kw))
        out, w = REF_TORCH.multihead_attention(*as_tensors(acts, params, masks), **kw)
        np.testing.assert_allclose(w.numpy(), expected_w, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out.numpy(), expected_out, rtol=1e-9, atol=1e-9)
        out_np, w_np = REF_NUMPY.multihead_attention(acts, params, masks, **kw)
        assert out_np.dtype == w_np.dtype == np.float64
        np.testing.assert_allclose(w_np, expected_w, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out_np, expected_out, rtol=1e-9, atol=1e-9)


def test_reference_matches_multi_head_attention_forward_whose_masks_mean_ignore():
    rng = np.random.default_rng(5)
    B, Q, K, H, D = 2, 3, 4, 2, 3
    E = H * D  # the model width torch needs
    acts = {"query": rng.normal(size=(B, Q, E)), "context": rng.normal(size=(B, K, E))}
    params = {n: rng.normal(size=(E, E)) / 2 for n in ("w_q", "w_k", "w_v", "w_o")}
    params.update({n: rng.normal(size=E) for n in ("b_q", "b_k", "b_v", "b_o")})
    key_mask = np.array([[True, True, False, True], [False, True, True, True]])
    t = {k: torch.tensor(v) for k, v in params.items()}
    query = torch.tensor(acts["query"]).transpose(0, 1)  # torch wants [T, B, E]
    context = torch.tensor(acts["context"]).transpose(0, 1)
    out, w = F.multi_head_attention_forward(
        query,
        context,
        context,
        E,
        H,
        in_proj_weight=None,
        in_proj_bias=torch.cat([t["b_q"], t["b_k"], t["b_v"]]),
        bias_k=None,
        bias_v=None,
        add_zero_attn=False,
        dropout_p=0.0,
        out_proj_weight=t["w_o"].T,
        out_proj_bias=t["b_o"],
        training=False,
        key_padding_mask=torch.tensor(~key_mask),  # True = ignore there
        need_weights=True,
        use_separate_proj_weight=True,
        q_proj_weight=t["w_q"].T,
        k_proj_weight=t["w_k"].T,
        v_proj_weight=t["w_v"].T,
        average_attn_weights=False,
    )
    ours, our_w = REF_TORCH.multihead_attention(*as_tensors(acts, params, {"key_mask": key_mask}), heads=H)
    np.testing.assert_allclose(ours.numpy(), out.transpose(0, 1).numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(our_w.numpy(), w.numpy(), rtol=1e-9, atol=1e-12)


def worked_example(dtype=torch.float64):
    acts = {"query": [[[1, 1], [1, 1]]], "context": [[[0, 1, 2, 1], [1, 0, 4, 4], [100, 100, 99, 99]]]}
    params = {
        "w_q": [[1, 0], [0, 1]],
        "w_k": [[1, 0], [0, 1], [0, 0], [0, 0]],
        "w_v": [[0, 0], [0, 0], [1, 0], [0, 1]],
        "w_o": [[1, 2], [3, -1]],
        "b_o": [1, 2],
    }
    masks = {
        "key_mask": [[True, True, False]],
        "query_mask": [[True, False]],
        "attention_mask": [[[[True, True, True], [True, True, True]], [[False, True, True], [False, True, True]]]],
    }
    return as_tensors(acts, params, masks, dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_worked_example_numbers(dtype):
    out, w = REF_TORCH.multihead_attention(*worked_example(dtype), heads=2)
    assert out.dtype == w.dtype == dtype
    np.testing.assert_allclose(out[0, 0].double().numpy(), [16.462117, 4.924234], atol=1e-5)
    assert out[0, 1].tolist() == [0.0, 0.0]  # b_o suppressed
    np.testing.assert_allclose(w[0, 0, 0].double().numpy(), [0.268941, 0.731059, 0.0], atol=1e-6)
    assert w[0, 1, 0].tolist() == [0.0, 1.0, 0.0]
    assert w[0, :, 1].abs().sum().item() == 0.0
    acts, params, masks = worked_example()
    out_np, _ = REF_NUMPY.multihead_attention(
        {k: v.numpy() for k, v in acts.items()},
        {k: v.numpy() for k, v in params.items()},
        {k: v.numpy() for k, v in masks.items()},
        heads=2,
    )
    np.testing.assert_allclose(out_np, out.double().numpy(), atol=1e-5)


def test_reference_keeps_dtype_and_the_meta_device():
    acts, params, masks = worked_example(torch.float32)
    meta = [{k: v.to("meta") for k, v in d.items()} for d in (acts, params, masks)]
    out, w = REF_TORCH.multihead_attention(*meta, heads=2, causal=True, causal_offset=1)
    assert (out.device.type, w.device.type, out.dtype, tuple(out.shape), tuple(w.shape)) == (
        "meta",
        "meta",
        torch.float32,
        (1, 2, 2),
        (1, 2, 2, 3),
    )


# --- gradients ------------------------------------------------------------------------------


def test_reference_gradients_match_the_independent_computation():
    rng = np.random.default_rng(11)
    for _ in range(15):
        acts, params, masks, kw = random_case(rng, empty_rows=False)
        inputs = as_tensors(acts, params, masks)
        _, ours = grads(REF_TORCH.multihead_attention, *inputs, **kw)
        _, theirs = grads(lambda a, p, m, **k: independent(a, p, m, **k), *inputs, **kw)
        assert ours["grads"].keys() == theirs["grads"].keys() and not ours["disconnected"]
        for name in ours["grads"]:
            np.testing.assert_allclose(ours["grads"][name], theirs["grads"][name], rtol=1e-7, atol=1e-9, err_msg=name)


def test_reference_gradients_are_finite_and_pass_gradcheck_with_fully_masked_rows():
    rng = np.random.default_rng(3)
    acts, params, masks, kw = random_case(rng, B=2, Q=3, K=3, H=2, D=2, Dv=2)
    masks = {
        "query_mask": np.array([[True, False, True], [True, True, True]]),
        "key_mask": np.array([[True, True, False], [False, False, False]]),
    }  # batch 1: nothing
    acts["bias"] = rng.normal(size=(2, 1, 3))
    a, p, m = as_tensors(acts, params, masks)
    names = list(a) + list(p)
    leaves = [t.requires_grad_() for t in list(a.values()) + list(p.values())]

    def f(*values):
        given = dict(zip(names, values))
        return REF_TORCH.multihead_attention({k: given[k] for k in a}, {k: given[k] for k in p}, m, heads=2)

    assert torch.autograd.gradcheck(f, leaves)
    _, extra = grads(REF_TORCH.multihead_attention, a, p, m, heads=2)
    assert all(np.isfinite(g).all() for g in extra["grads"].values())


def test_harness_reports_a_graph_cut_instead_of_crashing():
    def detached(a, p, m, **kw):
        out, w = REF_TORCH.multihead_attention(a, p, m, **kw)
        return out.detach(), w.detach()

    value, extra = grads(detached, *worked_example(), heads=2)
    assert "requires grad" in extra["problem"] and len(value) == 2
    value, extra = grads(lambda a, p, m, **kw: "oops", *worked_example(), heads=2)
    assert value == "oops" and "pair of tensors" in extra["problem"]


# --- graded (in-process, cached), and once through the CLI ---------------------------------


def statuses(data) -> dict:
    return {c["id"]: c["status"] for c in data["checks"]}


@pytest.mark.slow
def test_nan_gradient_variant_passes_every_value_check_and_fails_the_gradient_check():
    data, code = graded_json(SOLUTIONS / "bugs" / "nan-gradient-masked-rows.py", seed=1)  # shared with test_catalogue
    status = statuses(data)
    assert code == 1 and not data["passed"]
    assert status["gradients-finite-on-masked-rows"] == "fail"
    assert {c for c, s in status.items() if s != "pass"} <= GRADIENT_CHECKS
    assert [d["bug"] for d in data["diagnosis"]][:1] == ["nan-gradient-masked-rows"]


@pytest.mark.slow
def test_numpy_solution_passes_with_gradient_checks_skipped_and_says_so():
    data, code = graded_json(SOLUTIONS / "reference_numpy.py", seed=1)  # shared with test_catalogue
    status = statuses(data)
    assert code == 0 and data["passed"]
    assert {c for c, s in status.items() if s == "skip"} == GRADIENT_CHECKS | {"device-preserved"}
    assert all(s == "pass" for c, s in status.items() if c not in GRADIENT_CHECKS | {"device-preserved"})
    skipped = [c for c in data["checks"] if c["id"] in GRADIENT_CHECKS]
    assert all(c["points"] == 0 and "does not import torch" in c["message"] for c in skipped)
    assert data["score"]["points"] < data["score"]["max_points"]
    assert any("gradients" in n and "not checked" in n for n in data["notes"])
    text = attn_kit("check", SOLUTIONS / "reference_numpy.py", "--seed", "4")
    assert text.returncode == 0 and "gradients-match-reference, gradients-finite-on-masked-rows not checked" in " ".join(
        text.stdout.split()
    )


def variant(tmp_path, name, old, new) -> Path:
    """The torch reference with one textual change, as a candidate file."""
    text = (SOLUTIONS / "reference_torch.py").read_text()
    assert text.count(old) == 1
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.slow
def test_device_check_runs_on_meta(tmp_path):
    on_cpu = variant(
        tmp_path, "on_cpu", "torch.ones((B, H, Q, K), dtype=torch.bool, device=device)", "torch.ones((B, H, Q, K), dtype=torch.bool)"
    )
    report = pipeline.grade(on_cpu, pipeline.Options(seed=1))
    device = next(r for r in report.results if r.id == "device-preserved")
    assert device.status == "fail" and "device=query.device" in device.message
    assert all(r.status == "pass" for r in report.results if r.id != "device-preserved")
    reads = variant(tmp_path, "reads", "    if causal:\n", "    if bool(allowed.all()):\n        pass\n    if causal:\n")
    report = pipeline.grade(reads, pipeline.Options(seed=1))
    device = next(r for r in report.results if r.id == "device-preserved")
    assert device.status == "skip" and report.passed
    assert any("device-preserved not checked" in n for n in report.notes)


def test_returning_float64_for_float32_inputs_fails_only_the_dtype_check(tmp_path):
    upcast = variant(tmp_path, "upcast", "    return output, attention\n", "    return output.double(), attention.double()\n")
    report = pipeline.grade(upcast, pipeline.Options(seed=2))
    failing = {r.id: r.message for r in report.results if r.status != "pass"}
    assert list(failing) == ["dtype-preserved"] and "torch.float32" in failing["dtype-preserved"]


def test_tensors_reach_the_candidate_by_value(tmp_path):
    """torch's shared-memory pickling is switched off: an in-place write stays in the worker."""
    import attn_kit.checks.mha_masked_bias  # noqa: F401 - the import makes the setting
    from attn_kit.sandbox.session import Sandbox

    path = tmp_path / "writer.py"
    path.write_text("def write(x):\n    x.add_(1)\n    return x.is_contiguous()\n")
    base = torch.zeros(3, 4, dtype=torch.float64)
    with Sandbox(str(path)) as sandbox:
        sandbox.start()
        outcome = sandbox.call("write", (base[:, ::2],))
    assert outcome.ok and outcome.value is False and outcome.mutated == ("x",)
    assert base.abs().sum().item() == 0.0


def test_plain_tensors_cross_by_value_and_views_keep_their_storage(tmp_path):
    """The kit pickles plain tensors through NumPy (harness_torch.plain_tensors) and leaves views
    and shared storage to torch: the worker receives the same values, dtypes and flags either way,
    and the diagnosis' copies of a view still share their base's storage."""
    from attn_kit.base import torch_support
    from attn_kit.diagnosis import diagnose
    from attn_kit.sandbox.session import Sandbox

    x = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], dtype=torch.float32, requires_grad=True)
    base = torch.zeros(4, dtype=torch.float64)
    meta = torch.empty(2, 5, dtype=torch.float16, device="meta")
    args = (x, base, base.view(2, 2), meta, torch.tensor([True, False]))
    plain = torch_support.plain_tensors(args)
    assert set(plain) == {id(x), id(meta), id(args[4])}  # base and its view share storage
    path = tmp_path / "receives.py"
    path.write_text(
        "def look(x, base, view, meta, flags):\n"
        "    view.add_(1)\n"
        "    return [str(x.dtype), x.requires_grad, x.is_leaf, x.tolist(), view.tolist(), str(meta.device),\n"
        "            tuple(meta.shape), str(meta.dtype), flags.tolist()]\n"
    )
    with Sandbox(str(path)) as sandbox:
        sandbox.start()
        outcome = sandbox.call("look", args)
    assert outcome.ok, outcome.detail or outcome.error
    assert outcome.value == [
        "torch.float32",
        True,
        True,
        [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]],
        [[1.0, 1.0], [1.0, 1.0]],
        "meta",
        (2, 5),
        "torch.float16",
        [True, False],
    ]
    assert float(base.sum()) == 0.0 and "view" in outcome.mutated  # by value: the kit's own stays zero
    copied = diagnose.deep_copy(args)
    assert copied[0] is not x and torch.equal(copied[0], x) and copied[0].requires_grad
    copied[2].add_(1)
    assert float(copied[1].sum()) == 4.0 and float(base.sum()) == 0.0  # the copied view still shares


# --- without torch ----------------------------------------------------------------------------


def run_without_torch(code: str) -> subprocess.CompletedProcess:
    """Python with torch hidden (sys.modules['torch'] = None: find_spec says absent, import fails)."""
    prelude = "import sys\nsys.modules['torch'] = None\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120, env=dict(os.environ, NO_COLOR="1")
    )


@pytest.mark.parametrize("solution", ["reference_torch.py", "reference_numpy.py"])
def test_without_torch_check_says_how_to_install_it(solution):
    proc = run_without_torch(f"from attn_kit.cli import main\nsys.argv = ['attn-kit', 'check', {str(SOLUTIONS / solution)!r}]\nmain()\n")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    said = " ".join(proc.stderr.split())
    assert INSTALL["torch"] in said, "the CPU-only command the README gives"
    assert "attn-kit[torch]" not in said and "'.[torch]'" not in said, "on no index / only from the repository root"


def test_checking_an_mha_screen_file_never_imports_torch():
    reference = solutions_dir("mha-screen") / "reference_numpy.py"
    code = (
        f"import sys\nfrom attn_kit.grading import pipeline as grading\nreport = grading.grade({str(reference)!r})\n"
        "assert report.passed\nprint('torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
