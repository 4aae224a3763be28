"""The graded suite for mha-masked-bias: PyTorch cross-attention with masks, additive bias, gradients.

A file that imports torch is given torch tensors; a file that does not is given float64 NumPy
arrays and checked for values only (the device and gradient checks are skipped with the reason,
and the report says so). Expected values come from reference_torch.py in the kit's process, in
float64. Gradients are taken in the candidate's process by kit/base/torch_support.py.

torch is imported by the functions that use it, so reading the suite (`dev check`, the check
list) does not load it. Grading a torch exercise imports it in the kit's process before the sandbox
forks its zygote (the zygote's preload); the sandbox then makes two process-wide settings
(kit/base/torch_support.settle_process):
- torch.set_num_threads(1): the tensors here are tiny, and a process forked after torch's OpenMP
  pool has started hangs at its first parallel op (reproduced: a matmul in the kit, then a fork,
  then a matmul in the worker never returns). Workers inherit the setting.
- tensors cross to the candidate's process by value, like NumPy arrays: `import torch` registers
  shared-memory reducers with multiprocessing's pickler, so an in-place write in the candidate's
  process would land in the kit's own tensors.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from attn_kit.base.errors import CallFailed
from attn_kit.base.records import TensorValue
from attn_kit.compare.registry import CheckSkipped, Relaxation, Suite, both, equal

from .cases import hot_blocked_tokens
from .verdicts import expect_causal_invariance

if TYPE_CHECKING:
    import torch

SUITE = Suite("mha-masked-bias")
check = SUITE.check

FN = "multihead_attention"
HARNESS = "attn_kit.base.torch_support:grads"
OUT_AXES = ("batch", "query", "feature")
ATT_AXES = ("batch", "head", "query", "key")
FLOAT32 = {"rtol": 1e-4, "atol": 1e-5}
GRADS = {"rtol": 1e-6, "atol": 1e-9}
NUMPY_NO_GRADS = (
    "gradients are only checked for PyTorch solutions, and this file does not import torch: "
    "it was given float64 NumPy arrays and graded on values only"
)


# --- cases -------------------------------------------------------------------------------------


@dataclass
class Case:
    """One set of inputs as float64/bool NumPy arrays; sent as tensors or arrays per solution."""

    activations: dict
    parameters: dict
    masks: dict
    heads: int
    causal: bool = False
    causal_offset: int = 0
    facts: dict = field(default_factory=dict)

    @property
    def kwargs(self) -> dict:
        return {"heads": self.heads, "causal": self.causal, "causal_offset": self.causal_offset}

    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        B, Q, _ = self.activations["query"].shape
        K = self.activations["context"].shape[1]
        return (B, Q, self.parameters["w_o"].shape[1]), (B, self.heads, Q, K)

    def describe(self) -> dict:
        B, Q, _ = self.activations["query"].shape
        K = self.activations["context"].shape[1]
        H = self.heads
        facts = {"B": B, "Q": Q, "K": K, "H": H, "D": self.parameters["w_q"].shape[1] // H, "Dv": self.parameters["w_v"].shape[1] // H}
        bias = self.activations.get("bias")
        if bias is not None:
            facts["bias"] = "×".join(map(str, bias.shape))
        present = [k for k, v in self.masks.items() if v is not None]
        facts["masks"] = ", ".join(present) if present else "none"
        if self.causal:
            facts["causal_offset"] = self.causal_offset
        return {**facts, **self.facts}


def make_case(
    ctx,
    B=2,
    Q=3,
    K=4,
    H=2,
    D=3,
    Dv=None,
    Cq=5,
    Cctx=6,
    Cout=4,
    biases=True,
    bias=None,
    masks=("key_mask", "query_mask", "attention_mask"),
    causal=False,
    causal_offset=0,
    scale=1.0,
    **facts,
) -> Case:
    """Random inputs; `bias` is the additive bias's shape (None: no bias). Each batch element
    keeps one key that every head's attention_mask and the key_mask allow; query_mask is random.
    The widths are those of the shape the check is judged at (ctx.dims: a relaxation's)."""
    rng = ctx.rng
    Dv = D if Dv is None else Dv
    dims = ctx.dims(B=B, Q=Q, K=K, H=H, D=D, Dv=Dv, Cq=Cq, Cctx=Cctx, Cout=Cout)
    B, Q, K, H, D, Dv, Cq, Cctx, Cout = (dims[n] for n in ("B", "Q", "K", "H", "D", "Dv", "Cq", "Cctx", "Cout"))

    def normal(*shape, std=1.0):
        return (rng.normal(0.0, std, size=shape)).round(6)

    activations = {"query": normal(B, Q, Cq, std=scale), "context": normal(B, K, Cctx, std=scale)}
    if bias is not None:
        activations["bias"] = normal(*bias, std=1.5)
    parameters = {
        "w_q": normal(Cq, H * D, std=1 / np.sqrt(Cq)),
        "w_k": normal(Cctx, H * D, std=1 / np.sqrt(Cctx)),
        "w_v": normal(Cctx, H * Dv, std=1 / np.sqrt(Cctx)),
        "w_o": normal(H * Dv, Cout, std=1 / np.sqrt(H * Dv)),
    }
    if biases:
        parameters.update(
            b_q=normal(H * D, std=0.5), b_k=normal(H * D, std=0.5), b_v=normal(H * Dv, std=0.5), b_o=normal(Cout, std=0.5) + 1.0
        )
    found = {}
    if "key_mask" in masks:
        found["key_mask"] = rng.random((B, K)) < 0.75
        found["key_mask"][np.arange(B), rng.integers(K, size=B)] = True
    if "query_mask" in masks:
        found["query_mask"] = rng.random((B, Q)) < 0.85
    if "attention_mask" in masks:
        att = rng.random((B, H, Q, K)) < 0.75
        keys = found.get("key_mask", np.ones((B, K), bool))
        for b in range(B):  # keep a row alive: one allowed key that the key mask allows too
            j = rng.choice(np.flatnonzero(keys[b]))
            att[b, :, :, j] = True
        found["attention_mask"] = att
    return Case(activations, parameters, found, H, causal, causal_offset, dict(facts))


def uses_torch(ctx) -> bool:
    return ctx.source is None or any(name == "torch" for name, _ in ctx.source.imports())


def to_torch(value, dtype=None, device="cpu"):
    """NumPy arrays (also inside dicts) -> tensors; floats in dtype (float64 by default), booleans
    stay boolean."""
    import torch  # here, not at the top: reading the suite does not load torch

    dtype = torch.float64 if dtype is None else dtype
    if isinstance(value, dict):
        return {k: to_torch(v, dtype, device) for k, v in value.items()}
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.dtype == bool:
        return torch.tensor(arr, device=device)
    return torch.tensor(arr, dtype=dtype, device=device)


def to_numpy(value):
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if value is None:
        return None
    arr = np.asarray(value)
    return arr.copy() if arr.dtype == bool else arr.astype(np.float64)


def send(ctx, case: Case, dtype=None, device="cpu") -> tuple[dict, dict, dict]:
    """The three dicts as this solution receives them: tensors, or float64 NumPy arrays."""
    parts = (case.activations, case.parameters, case.masks)
    if uses_torch(ctx):
        return tuple(to_torch(p, dtype, device) for p in parts)
    return tuple(to_numpy(p) for p in parts)


def reference(ctx, case: Case, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """The oracle's (output, attention) in float64, on the inputs rounded to `dtype` as sent."""
    acts, params, masks = (to_torch(p, dtype) for p in (case.activations, case.parameters, case.masks))
    acts, params = ({k: None if v is None else v.double() for k, v in d.items()} for d in (acts, params))
    out, att = ctx.oracle.multihead_attention(acts, params, masks, **case.kwargs)
    return out.numpy(), att.numpy()


def pair(ctx, value) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        got = type(value).__name__ + (f" of length {len(value)}" if isinstance(value, (tuple, list)) else "")
        ctx.fail(f"`{FN}` must return a pair (output, attention); it returned {got}")
    return value[0], value[1]


def compare_case(ctx, case: Case, what: str = "", dtype=None, **facts):
    """Call the candidate on the case and compare attention, then output, with the reference
    (inputs in `dtype`, float64 by default)."""
    import torch  # here, not at the top: reading the suite does not load torch

    acts, params, masks = send(ctx, case, dtype)
    ctx.describe(**case.describe(), **facts)
    value = ctx.call(FN, acts, params, masks, **case.kwargs)
    call = ctx.last_call
    out_ref, att_ref = reference(ctx, case, dtype)
    call.expected = (out_ref, att_ref)
    out, att = pair(ctx, value)
    tol = FLOAT32 if dtype == torch.float32 else {}
    prefix = f"{what}: " if what else ""
    att = ctx.expect_close(att, att_ref, f"{prefix}attention", ATT_AXES, "B×H×Q×K", call=call, **tol)
    out = ctx.expect_close(out, out_ref, f"{prefix}output", OUT_AXES, "B×Q×Cout", call=call, **tol)
    return out, att


def kind_of(value) -> str:
    if isinstance(value, TensorValue):
        return f"a {value.dtype} tensor on {value.device}"
    if isinstance(value, np.ndarray):
        return f"a NumPy {value.dtype} array"
    return f"a {type(value).__name__}"


# --- public examples ---------------------------------------------------------------------------


@check(
    points=2,
    public=True,
    catches=("no-output-projection", "weights-transposed", "transpose-reverses-all-axes", "key-mask-on-query-axis"),
    relaxable=False,
)
def output_shapes(ctx):
    """Returns the pair (output [B,Q,Cout], attention [B,H,Q,K]), shapes checked strictly.

    With Q ≠ K, D ≠ Dv and Cq, Cctx, Cout all different, so every width has one right place.
    When that call raises, the check still fails, and says at which simpler widths the code runs.
    """
    case = make_case(ctx, B=2, Q=3, K=5, H=2, D=3, Dv=2, Cq=4, Cctx=6, Cout=7)
    out_shape, att_shape = case.shapes()
    ctx.describe(**case.describe())
    outcome = ctx.outcome(FN, *send(ctx, case), **case.kwargs)
    general = ctx.last_call
    if outcome.status == "raised":
        supported = supported_widths(ctx)
        if supported:
            ctx.failing_call = general
            ctx.fail(
                f"with D ≠ Dv and Cq, Cctx, Cout all different the call {outcome.describe_failure()}; "
                f"your code runs only when {supported}. Each projection has its own shape: w_q Cq×H·D, "
                "w_k Cctx×H·D, w_v Cctx×H·Dv, w_o H·Dv×Cout"
            )
    if not outcome.ok:
        ctx.failing_call = general
        raise CallFailed(general)
    out, att = pair(ctx, outcome.value)
    ctx.array(out, "output", out_shape, "B×Q×Cout")
    ctx.array(att, "attention", att_shape, "B×H×Q×K")


def model_width(dims: dict) -> dict:
    """Cq = Cctx = Cout = H·D: every projection square, as in layers built from one model width."""
    if not {"H", "D"} <= dims.keys():
        return dict(dims)
    width = dims["H"] * dims["D"]
    return {**dims, **{name: width for name in ("Cq", "Cctx", "Cout") if name in dims}}


# The simpler shapes real layers support, tried in this order when a check's own case raises
# (kit/grading/relax.py): one head width for q, k and v; an output as wide as the query; one
# width for every input; and square projections of one model width.
SUITE.relaxations = (
    Relaxation("Dv = D", equal("D", "Dv")),
    Relaxation("Cout = Cq", equal("Cq", "Cout")),
    Relaxation("Dv = D and Cout = Cq", both(equal("D", "Dv"), equal("Cq", "Cout"))),
    Relaxation("Cq = Cctx = Cout", equal("Cq", "Cctx", "Cout")),
    Relaxation("Dv = D and Cq = Cctx = Cout", both(equal("D", "Dv"), equal("Cq", "Cctx", "Cout"))),
    Relaxation("Dv = D and Cq = Cctx = Cout = H·D", both(equal("D", "Dv"), model_width)),
)


def supported_widths(ctx) -> str:
    """The first simpler shape (SUITE.relaxations) at which the candidate returns the right shapes
    ('' if none); no masks, so that only the widths are in question."""
    general = {"B": 2, "Q": 3, "K": 5, "H": 2, "D": 3, "Dv": 2, "Cq": 4, "Cctx": 6, "Cout": 7}
    for relaxation in SUITE.relaxations:
        said, dims = relaxation.said, relaxation.dims(general)
        case = make_case(ctx, masks=(), **dims)
        outcome = ctx.outcome(FN, *send(ctx, case), **case.kwargs)
        value = outcome.value if outcome.ok else None
        if isinstance(value, (tuple, list)) and len(value) == 2:
            shapes = tuple(tuple(getattr(v, "shape", np.shape(v))) for v in value)
            if shapes == case.shapes():
                return said
    return ""


@check(points=2, after=("output-shapes",))
def dtype_preserved(ctx):
    """Both results keep the inputs' dtype: float32 in, float32 out; float64 in, float64 out.

    PyTorch solutions are called with float32 and float64 tensors and must return tensors;
    NumPy solutions get float64 arrays and must return float64 arrays.
    """
    import torch  # here, not at the top: reading the suite does not load torch

    case = make_case(ctx, B=1, Q=2, K=3, H=2, D=2)
    torch_solution = uses_torch(ctx)
    for dtype in (torch.float32, torch.float64) if torch_solution else (torch.float64,):
        ctx.describe(**case.describe(), dtype=str(dtype) if torch_solution else "numpy.float64")
        out, att = pair(ctx, ctx.call(FN, *send(ctx, case, dtype), **case.kwargs))
        for value, what in ((out, "output"), (att, "attention")):
            if torch_solution and not (isinstance(value, TensorValue) and value.dtype == str(dtype)):
                ctx.fail(
                    f"{what} is {kind_of(value)}; given {dtype} tensors, return {dtype} tensors "
                    "(no .numpy(), .double() or .float() on the way, no torch.tensor(...) without dtype=)"
                )
            if not torch_solution and not (isinstance(value, np.ndarray) and value.dtype == np.float64):
                ctx.fail(f"{what} is {kind_of(value)}; given float64 NumPy arrays, return float64 arrays")


# The statement's worked example: D = Dv = 1, so scaling does not show; masks do.
EXAMPLE_ACTIVATIONS = {"query": [[[1, 1], [1, 1]]], "context": [[[0, 1, 2, 1], [1, 0, 4, 4], [100, 100, 99, 99]]]}
EXAMPLE_PARAMETERS = {
    "w_q": [[1, 0], [0, 1]],
    "w_k": [[1, 0], [0, 1], [0, 0], [0, 0]],
    "w_v": [[0, 0], [0, 0], [1, 0], [0, 1]],
    "w_o": [[1, 2], [3, -1]],
    "b_o": [1, 2],
}
EXAMPLE_MASKS = {
    "key_mask": [[True, True, False]],
    "query_mask": [[True, False]],
    "attention_mask": [[[[True, True, True], [True, True, True]], [[False, True, True], [False, True, True]]]],
}
EXAMPLE_OUTPUT = [[[16.462117157260010, 4.924234314520019], [0.0, 0.0]]]


@check(
    points=2, public=True, after=("output-shapes",), catches=("b-o-not-suppressed", "mask-inverted", "softmax-wrong-axis", "biases-ignored")
)
def public_worked_example(ctx):
    """The statement's worked example: query 0 gives ≈ [16.462117, 4.924234], masked query 1 exactly [0, 0]."""
    case = Case(
        {k: np.array(v, float) for k, v in EXAMPLE_ACTIVATIONS.items()},
        {k: np.array(v, float) for k, v in EXAMPLE_PARAMETERS.items()},
        {k: np.array(v, bool) for k, v in EXAMPLE_MASKS.items()},
        heads=2,
        facts={"example": "the worked example in the statement"},
    )
    out, _ = compare_case(ctx, case)
    ctx.expect_close(out[0, 1], [0.0, 0.0], "output of the masked query 1", ("feature",), atol=0.0, rtol=0.0)
    ctx.expect_close(out[0, 0], EXAMPLE_OUTPUT[0][0], "output of query 0", ("feature",), rtol=1e-6)


# --- dtype, device, memory layout, optional keys ------------------------------------------------

META_DATA_ACCESS = re.compile(r"item\(\)|no data|numpy|copy out|data pointer|local_scalar|cannot be called on meta", re.IGNORECASE)


@check(points=1, after=("output-shapes",))
def device_preserved(ctx):
    """Outputs come back on the inputs' device: every new tensor is made on query.device.

    Checked on PyTorch's `meta` device (tensors with shapes but no data), which any CPU/GPU
    mix-up turns into an error or a CPU result.
    """
    import torch  # here, not at the top: reading the suite does not load torch

    if not uses_torch(ctx):
        raise CheckSkipped("NumPy arrays have no device (device placement is checked for PyTorch solutions)")
    case = make_case(ctx, bias=(2, 1, 4), causal=True, causal_offset=1)
    out_shape, att_shape = case.shapes()
    ctx.describe(**case.describe(), device="meta")
    outcome = ctx.outcome(FN, *send(ctx, case, torch.float64, "meta"), **case.kwargs)
    error = f"{outcome.error.type}: {outcome.error.message}" if outcome.status == "raised" else ""
    if error and META_DATA_ACCESS.search(error):
        raise CheckSkipped(
            f"the code reads tensor values in Python ({error}), which PyTorch's data-less "
            "meta device cannot run; that works on a CPU or GPU, where each such read waits "
            "for the device"
        )
    if error and "device" in error:
        ctx.fail(
            f"with every input on the meta device the call raised {error}: a tensor was made on the "
            "CPU; create new tensors with device=query.device (or torch.zeros_like, x.new_zeros, "
            "torch.arange(..., device=...))"
        )
    if not outcome.ok:
        ctx.fail(f"with every input on the meta device the call {outcome.describe_failure()}")
    out, att = pair(ctx, outcome.value)
    for value, what, shape in ((out, "output", out_shape), (att, "attention", att_shape)):
        if not isinstance(value, TensorValue):
            ctx.fail(f"{what} is {kind_of(value)}, not a tensor")
        ctx.expect(
            value.device == "meta",
            f"{what} is on {value.device} although every input was on the meta device: create new tensors with device=query.device",
        )
        ctx.expect(tuple(value.shape) == shape, f"{what} has shape {tuple(value.shape)} on the meta device, expected {shape}")
        ctx.expect(value.dtype == "torch.float64", f"{what} is {value.dtype}, expected torch.float64")


def scattered(value: torch.Tensor, how: str) -> torch.Tensor:
    """The same values in a non-contiguous layout."""
    import torch  # here, not at the top: reading the suite does not load torch

    if how == "strided":  # every other element of a buffer twice as wide
        wide = torch.zeros(*value.shape[:-1], 2 * value.shape[-1], dtype=value.dtype)
        wide[..., ::2] = value
        return wide[..., ::2]
    if how == "transposed":  # column-major storage
        return value.transpose(-1, -2).contiguous().transpose(-1, -2)
    raise ValueError(how)


@check(points=1, after=("output-shapes",))
def non_contiguous_inputs(ctx):
    """Non-contiguous inputs work: strided and transposed views, and masks and bias expanded with stride 0.

    `.view()` on an input raises for these layouts; `.reshape()` or indexing works.
    """
    B, Q, K, H = 2, 3, 4, 2
    case = make_case(ctx, B=B, Q=Q, K=K, H=H, bias=(H, 1, K))
    if not uses_torch(ctx):
        compare_case(ctx, case, layout="NumPy arrays (pickled contiguous)")
        return
    acts, params, masks = send(ctx, case)
    acts["query"] = scattered(acts["query"], "strided")
    acts["context"] = scattered(acts["context"], "transposed")
    acts["bias"] = acts["bias"].expand(B, H, Q, K)
    for name in ("w_q", "w_k", "w_v", "w_o"):
        params[name] = scattered(params[name], "transposed")
    params["b_o"] = scattered(params["b_o"], "strided")
    masks["key_mask"] = masks["key_mask"][:1].expand(B, K)
    masks["attention_mask"] = masks["attention_mask"][:, :1].expand(B, H, Q, K)
    case = Case(
        {k: v.numpy() for k, v in acts.items()}, {k: v.numpy() for k, v in params.items()}, {k: v.numpy() for k, v in masks.items()}, H
    )
    ctx.describe(**case.describe(), layout="query strided, context and weights transposed, bias/masks expanded")
    value = ctx.call(FN, acts, params, masks, **case.kwargs)
    call = ctx.last_call
    out_ref, att_ref = reference(ctx, case)
    call.expected = (out_ref, att_ref)
    out, att = pair(ctx, value)
    ctx.expect_close(att, att_ref, "attention", ATT_AXES, "B×H×Q×K", call=call)
    ctx.expect_close(out, out_ref, "output", OUT_AXES, "B×Q×Cout", call=call)


@check(points=2, after=("output-shapes",))
def optional_keys_absent_or_none(ctx):
    """Every optional entry may be missing or None: no masks ({}), no biases, no additive bias.

    Also called with only the three required arguments, so heads=1, causal=False and
    causal_offset=0 come from the defaults.
    """
    case = make_case(ctx, biases=False, masks=())
    compare_case(ctx, case, "masks = {}, no bias keys")
    with_none = Case(
        dict(case.activations, bias=None),
        dict(case.parameters, b_q=None, b_k=None, b_v=None, b_o=None),
        {"key_mask": None, "query_mask": None, "attention_mask": None},
        case.heads,
    )
    compare_case(ctx, with_none, "every optional entry = None", optional="present as None")
    single = make_case(ctx, H=1, D=4, masks=("key_mask",))
    acts, params, masks = send(ctx, single)
    ctx.describe(**single.describe(), call="multihead_attention(activations, parameters, masks)")
    value = ctx.call(FN, acts, params, masks)
    call = ctx.last_call
    out_ref, att_ref = reference(ctx, single)
    call.expected = (out_ref, att_ref)
    out, att = pair(ctx, value)
    ctx.expect_close(att, att_ref, "defaults: attention", ATT_AXES, "B×H×Q×K", call=call)
    ctx.expect_close(out, out_ref, "defaults: output", OUT_AXES, "B×Q×Cout", call=call)


# --- the formula ------------------------------------------------------------------------------


@check(
    points=2,
    after=("output-shapes",),
    concept="scaling",
    catches=("no-scaling", "scale-by-model-width", "double-scaling", "scale-after-softmax"),
)
def scores_scaled_by_key_width(ctx):
    """Scores are divided by sqrt(D), the per-head key width: not by sqrt(H·D), not by 1."""
    case = make_case(ctx, B=2, Q=3, K=4, H=2, D=4, Dv=2, biases=False, masks=(), scale=1.5)
    compare_case(ctx, case)


@check(points=2, after=("output-shapes",), catches=("bias-scaled",), concept="scaling")
def additive_bias_broadcasts(ctx):
    """The additive bias is added after scaling, broadcast from [Q,K], [H,1,K] and [B,H,Q,K]."""
    B, Q, K, H = 2, 3, 4, 2
    for shape in ((Q, K), (H, 1, K), (B, H, Q, K)):
        case = make_case(ctx, B=B, Q=Q, K=K, H=H, D=4, bias=shape, masks=("key_mask",))
        compare_case(ctx, case, f"bias of shape {list(shape)}")


@check(points=1, after=("output-shapes",), catches=("reshape-without-transpose",), relaxable=False)
def value_width_differs_from_key_width(ctx):
    """Dv ≠ D, and query, context and output widths all differ: each projection has its own shape."""
    case = make_case(ctx, B=2, Q=2, K=5, H=2, D=2, Dv=5, Cq=3, Cctx=7, Cout=6, biases=False, masks=())
    compare_case(ctx, case)


@check(points=1, after=("output-shapes",), concept="head-split", relaxable=False)
def value_error_when_heads_do_not_divide(ctx):
    """heads < 1, or heads that does not divide the columns of w_q or of w_v, raises ValueError.

    Three calls, as the statement lists them: heads=0; w_q and w_v 6 columns wide with heads=4;
    w_q 4 columns wide (heads=4 divides it) and w_v 6 (it does not).
    """
    cases = (
        (make_case(ctx, B=1, Q=2, K=3, H=2, D=3, masks=()), 0, "heads=0"),
        (make_case(ctx, B=1, Q=2, K=3, H=2, D=3, masks=()), 4, "heads=4 with w_q and w_v 6 columns wide"),
        (make_case(ctx, B=1, Q=2, K=3, H=2, D=2, Dv=3, masks=()), 4, "heads=4 with w_q 4 columns wide but w_v 6"),
    )
    for case, heads, what in cases:
        ctx.describe(heads=heads, w_q_columns=case.parameters["w_q"].shape[1], w_v_columns=case.parameters["w_v"].shape[1])
        outcome = ctx.outcome(FN, *send(ctx, case), heads=heads, causal=False, causal_offset=0)
        if outcome.status == "raised" and outcome.error.type == "ValueError":
            continue
        happened = outcome.describe_failure() if not outcome.ok else "returned normally"
        ctx.fail(
            f"{what} should raise ValueError (heads must be at least 1 and divide the columns of both w_q and w_v); the call {happened}"
        )


@check(points=2, after=("output-shapes",), concept="head-split", catches=("reshape-without-transpose", "heads-interleaved"))
def heads_split_contiguously(ctx):
    """Head h uses projected columns h·D:(h+1)·D (and h·Dv:(h+1)·Dv), put back in that order.

    Catches reshape-without-transpose: [B,T,H·D] reshaped straight to [B,H,T,D] mixes tokens and heads.
    """
    case = make_case(ctx, B=2, Q=3, K=5, H=3, D=2, Dv=3, biases=False, masks=())
    compare_case(ctx, case)


@check(
    points=3,
    after=("output-shapes",),
    concept="masking",
    catches=("causal-offset-ignored", "causal-off-by-one", "causal-alignment-wrong", "mask-ignored"),
)
def causal_with_offset(ctx):
    """causal=True allows key j for query i when j <= i + causal_offset, also when Q ≠ K.

    Cases: Q=2, K=4, offset 2 (two new tokens after a cache of two); Q=K=4, offset 0;
    Q=3, K=5, offset -1 (query 0 then sees no key); Q=5, K=3, offset 1.
    """
    for Q, K, offset in ((2, 4, 2), (4, 4, 0), (3, 5, -1), (5, 3, 1)):
        case = make_case(ctx, B=1, Q=Q, K=K, H=2, D=2, masks=(), causal=True, causal_offset=offset)
        compare_case(ctx, case, f"Q={Q}, K={K}, causal_offset={offset}")


@check(
    points=2,
    after=("output-shapes",),
    concept="masking",
    catches=("mask-inverted", "fill-value-too-weak", "mask-ignored", "masks-combined-with-or"),
)
def masks_are_intersected(ctx):
    """key_mask, query_mask and attention_mask (True = allowed) all apply together, with causal on top."""
    case = make_case(ctx, B=2, Q=4, K=5, H=2, D=2)
    compare_case(ctx, case, "three masks")
    case = make_case(ctx, B=2, Q=4, K=4, H=2, D=2, causal=True)
    compare_case(ctx, case, "three masks and causal")


@check(points=2, after=("output-shapes",), concept="masking", catches=("key-mask-on-query-axis",))
def key_mask_blocks_keys_not_queries(ctx):
    """With Q = K, a key_mask that blocks only the last key takes it from every query, and only it.

    Q = K = 4, key_mask only: a key mask broadcast along the queries ([B,1,K,1]) fits these shapes
    without an error and blocks the last query's row instead of the last key's column. Every query
    must give the last key weight 0, and the last query still attends to the other keys.
    """
    B, K = 2, 4
    case = make_case(ctx, B=B, Q=K, K=K, H=2, D=2, masks=("key_mask",))
    case.masks["key_mask"] = np.ones((B, K), dtype=bool)
    case.masks["key_mask"][:, -1] = False
    compare_case(ctx, case, "Q = K = 4, the last key blocked")


# --- masked rows ------------------------------------------------------------------------------


def masked_rows_case(ctx, **kw) -> Case:
    """B=3: batch 0 has query 1 masked by query_mask and query 2 empty in every head; batch 1 has
    no allowed key at all; batch 2 has query 0 empty in head 0 only. b_o is large."""
    case = make_case(ctx, B=3, Q=3, K=4, H=2, D=2, **kw)
    m = case.masks
    m["query_mask"][:] = True
    m["query_mask"][0, 1] = False
    m["attention_mask"][0, :, 2, :] = False
    m["key_mask"][1, :] = False
    m["attention_mask"][2, 0, 0, :] = False
    m["attention_mask"][2, 1, 0, :] = m["key_mask"][2]  # head 1 keeps query 0 alive
    case.parameters["b_o"] = case.parameters["b_o"] + 2.0
    return case


def active_queries(case: Case) -> np.ndarray:
    """[B,Q]: whether the query has an allowed key in some head (from the reference's rule)."""
    m = case.masks
    allowed = m["attention_mask"] & m["key_mask"][:, None, None, :] & m["query_mask"][:, None, :, None]
    return allowed.any(axis=(1, 3))


@check(points=2, after=("output-shapes",), catches=("b-o-not-suppressed",), concept="masking")
def fully_masked_queries_output_zero(ctx):
    """A query with no allowed key in any head outputs exactly 0: b_o does not come back.

    Masked by query_mask, by an attention_mask that is empty in every head, and by a key_mask
    that allows nothing in one batch element.
    """
    case = masked_rows_case(ctx)
    out, _ = compare_case(ctx, case, masked="batch 0 queries 1-2, all of batch 1")
    dead = ~active_queries(case)
    ctx.expect_close(
        out[dead], np.zeros_like(out[dead]), "output rows of fully masked queries", ("masked query", "feature"), atol=0.0, rtol=0.0
    )


@check(points=2, after=("output-shapes",), catches=("b-o-dropped-for-partial",), concept="masking")
def partially_masked_queries_keep_b_o(ctx):
    """A query with at least one head that sees a key keeps b_o, even if its other heads see nothing."""
    case = masked_rows_case(ctx)
    compare_case(ctx, case, partial="batch 2, query 0: head 0 empty, head 1 active")


@check(points=2, after=("output-shapes",), concept="masking", catches=("blocked-row-nan", "blocked-row-uniform", "additive-mask-leaks"))
def empty_head_rows_are_zero(ctx):
    """An empty (batch, head, query) row has attention exactly 0: never NaN, never uniform."""
    case = masked_rows_case(ctx, bias=(3, 2, 3, 4))
    B, H, Q, K = case.shapes()[1]
    _, att = compare_case(ctx, case)
    m = case.masks
    allowed = m["attention_mask"] & m["key_mask"][:, None, None, :] & m["query_mask"][:, None, :, None]
    empty = ~allowed.any(axis=-1)
    ctx.expect_close(
        att[empty], np.zeros((int(empty.sum()), K)), "attention rows with no allowed key", ("empty row", "key"), atol=0.0, rtol=0.0
    )


@check(points=2, after=("output-shapes",), catches=("softmax-overflow",), concept="numerical-stability")
def stable_at_large_scores(ctx):
    """Scores of ±2000 (float64) and ±300 (float32) neither overflow nor give NaN: exp(710) and
    exp(89) are already inf in those types, so the row max has to come off first."""
    import torch  # here, not at the top: reading the suite does not load torch

    for dtype, peak in ((torch.float64, 2000.0), (torch.float32, 300.0)):
        if dtype == torch.float32 and not uses_torch(ctx):
            continue
        case = with_score_peak(make_case(ctx, B=1, Q=3, K=4, H=2, D=4, biases=False, masks=()), peak)
        compare_case(ctx, case, f"{str(dtype).split('.')[-1]}, largest |score| {peak:g}", dtype=dtype, largest_score=peak)


@check(points=2, after=("output-shapes",), concept="numerical-stability", catches=("max-over-blocked", "softmax-overflow"))
def stable_with_a_blocked_key_far_above(ctx):
    """Scores near 900 stay finite, and a key blocked by key_mask that scores near 2100 takes nothing.

    w_q = w_k = identity, queries and keys near 25 in every feature, the last key near 60 and
    blocked: exp of a raw score overflows in float64, and a max taken over the blocked key too
    makes every allowed weight underflow to 0 (weights [0, 0] instead of [0, 1]). No biases.
    """
    B, Q, K, H, D = 2, 3, 4, 2, 2
    case = make_case(ctx, B=B, Q=Q, K=K, H=H, D=D, Cq=H * D, Cctx=H * D, Cout=3, biases=False, masks=("key_mask",))
    case.activations["query"] = (25.0 + ctx.rng.normal(0.0, 0.1, size=(B, Q, H * D))).round(6)
    case.activations["context"] = hot_blocked_tokens(ctx.rng, B, K, H * D)
    case.parameters["w_q"] = np.eye(H * D)
    case.parameters["w_k"] = np.eye(H * D)
    case.masks["key_mask"] = np.ones((B, K), dtype=bool)
    case.masks["key_mask"][:, -1] = False
    compare_case(ctx, case, scores="about 900 allowed, about 2100 for the blocked last key")


@check(points=2, after=("output-shapes",), concept="masking", catches=("mask-inverted", "softmax-wrong-axis", "fill-value-too-weak"))
def uniform_when_queries_are_zero(ctx):
    """With w_q = 0 (and no b_q) every score is 0, so each query spreads its weight evenly over its allowed keys.

    key_mask only, no additive bias; b_k is kept, since q·b_k is the same for every key.
    """
    case = make_case(ctx, B=2, Q=3, K=5, H=2, D=3, masks=("key_mask",))
    case.parameters["w_q"] = np.zeros_like(case.parameters["w_q"])
    case.parameters.pop("b_q")
    compare_case(ctx, case, w_q="zeros")


@check(points=2, after=("output-shapes",), catches=("mask-inverted", "causal-off-by-one", "mask-ignored"), concept="masking")
def causal_future_is_ignored(ctx):
    """Changing context token t changes no output row before t: with causal=True, and with a causal attention_mask.

    Q = K = 5, causal_offset 0, no other mask, no biases: the solution's own causal bound, then
    the kit's lower-triangular attention_mask.
    """
    base = make_case(ctx, B=1, Q=5, K=5, H=2, D=2, biases=False, masks=())
    tril = np.tril(np.ones((5, 5), dtype=bool))[None, None]

    def run(context, own: bool):
        case = Case(
            dict(base.activations, context=context), base.parameters, {} if own else {"attention_mask": tril}, base.heads, causal=own
        )
        return pair(ctx, ctx.call(FN, *send(ctx, case), **case.kwargs))[0]

    for own in (True, False):
        expect_causal_invariance(
            ctx,
            lambda c, own=own: run(c, own),
            base.activations["context"],
            t=3,
            describe={"causal": own, "attention_mask": "none" if own else "lower-triangular"},
            what="output with causal=True" if own else "output with a causal attention_mask",
        )


def with_score_peak(case: Case, peak: float) -> Case:
    """Rescale the query (no projection biases) so the largest |q·k / sqrt(D)| is `peak`."""
    acts, p, H = case.activations, case.parameters, case.heads
    B, Q, _ = acts["query"].shape
    K, D = acts["context"].shape[1], p["w_q"].shape[1] // H
    q = (acts["query"] @ p["w_q"]).reshape(B, Q, H, D)
    k = (acts["context"] @ p["w_k"]).reshape(B, K, H, D)
    largest = np.abs(np.einsum("bqhd,bkhd->bhqk", q, k)).max() / np.sqrt(D)
    acts["query"] = (acts["query"] * (peak / largest)).round(6)
    return case


@check(points=1, catches=("mutates-input",), after=("output-shapes",))
def inputs_left_unmodified(ctx):
    """No input is written in place: activations, parameters and masks come back unchanged."""
    case = make_case(ctx, B=2, Q=3, K=4, H=2, bias=(2, 2, 3, 4), causal=True, causal_offset=1)
    m = case.masks  # masks that disagree, so combining them in place shows
    m["attention_mask"][:] = True
    m["key_mask"][0, 0] = m["query_mask"][1, 0] = False
    m["key_mask"][0, 1] = True
    ctx.describe(**case.describe())
    outcome = ctx.outcome(FN, *send(ctx, case), **case.kwargs)
    if outcome.mutated:
        ctx.fail(
            f"`{FN}` changed {', '.join(outcome.mutated)} in place (e.g. `mask &= ...`, `x.mul_()`, "
            "`masked_fill_` on an input); build new tensors instead"
        )
    if not outcome.ok:
        ctx.fail(f"`{FN}` {outcome.describe_failure()}")


@check(
    points=4,
    after=("output-shapes",),
    catches=(
        "no-scaling",
        "scale-by-model-width",
        "reshape-without-transpose",
        "softmax-wrong-axis",
        "mask-inverted",
        "causal-off-by-one",
        "causal-offset-ignored",
        "bias-scaled",
        "biases-ignored",
        "b-o-not-suppressed",
        "b-o-dropped-for-partial",
        "blocked-row-nan",
        "blocked-row-uniform",
        "heads-interleaved",
        "additive-mask-leaks",
        "fill-value-too-weak",
        "double-scaling",
        "softmax-across-batch",
        "mask-ignored",
        "masks-combined-with-or",
        "causal-alignment-wrong",
        "scale-after-softmax",
    ),
)
def randomised_agreement(ctx):
    """Agrees with the reference on randomised hidden cases: shapes, heads, masks, bias shapes, causal offsets.

    Six float64 cases with B up to 3, Q and K up to 6, up to 3 heads, D and Dv up to 4; rerun
    with the same --seed to get the same cases.
    """
    for n in range(6):
        B, Q, K, H = (int(ctx.rng.integers(1, 4)), int(ctx.rng.integers(1, 7)), int(ctx.rng.integers(1, 7)), int(ctx.rng.integers(1, 4)))
        bias = [None, (Q, K), (H, 1, K), (B, H, Q, K), (B, 1, Q, K), (1, 1, 1, K)][int(ctx.rng.integers(6))]
        names = tuple(m for m in ("key_mask", "query_mask", "attention_mask") if ctx.rng.random() < 0.6)
        causal = bool(ctx.rng.random() < 0.4)
        case = make_case(
            ctx,
            B=B,
            Q=Q,
            K=K,
            H=H,
            D=int(ctx.rng.integers(1, 5)),
            Dv=int(ctx.rng.integers(1, 5)),
            Cq=int(ctx.rng.integers(1, 6)),
            Cctx=int(ctx.rng.integers(1, 6)),
            Cout=int(ctx.rng.integers(1, 6)),
            biases=bool(ctx.rng.random() < 0.7),
            bias=bias,
            masks=names,
            causal=causal,
            causal_offset=int(ctx.rng.integers(-2, 3)) if causal else 0,
            scale=3.0 if n == 5 else 1.0,
        )
        compare_case(ctx, case, f"case {n + 1}", random_case=n + 1)


# --- gradients --------------------------------------------------------------------------------


def compare_gradients(ctx, case: Case):
    """float64: gradients of a fixed random projection of both outputs, candidate vs reference."""
    from attn_kit.base.torch_support import grads

    if not uses_torch(ctx):
        raise CheckSkipped(NUMPY_NO_GRADS)
    ctx.describe(**case.describe(), dtype="torch.float64", loss="sum(output * P1) + sum(attention * P2), P1 and P2 fixed standard normals")
    value = ctx.call(FN, *send(ctx, case), harness=HARNESS, **case.kwargs)
    call = ctx.last_call
    inputs = (to_torch(p) for p in (case.activations, case.parameters, case.masks))
    ref_value, ref_extra = grads(ctx.oracle.multihead_attention, *inputs, **case.kwargs)
    out_ref, att_ref = (t.numpy() for t in ref_value)
    call.expected = (out_ref, att_ref)
    out, att = pair(ctx, value)
    ctx.expect_close(att, att_ref, "attention", ATT_AXES, "B×H×Q×K", call=call)
    ctx.expect_close(out, out_ref, "output", OUT_AXES, "B×Q×Cout", call=call)
    extra = ctx.last_call.outcome.extra
    if extra.get("problem"):
        ctx.fail(f"no gradient could be taken: {extra['problem']}")
    # b_k's true gradient is 0 (q·b_k is the same for every key of a query, and softmax ignores a
    # constant), so a solution that never adds b_k is right: no gradient need reach it
    cut = [name for name in extra.get("disconnected", ()) if name not in ref_extra["disconnected"] and name != "b_k"]
    if cut:
        ctx.fail(
            f"no gradient reaches {', '.join(cut)}: the outputs do not depend on it through autograd "
            "(a .detach(), .item(), NumPy round trip or torch.no_grad() cuts the graph)"
        )
    for name, expected in ref_extra["grads"].items():
        got = extra["grads"].get(name)
        axes = {"query": ("batch", "query", "feature"), "context": ("batch", "key", "feature")}.get(
            name, ("row", "column") if expected.ndim == 2 else ()
        )
        bad = (
            np.argwhere(~np.isfinite(got))
            if isinstance(got, np.ndarray) and got.shape == expected.shape
            else np.empty((0, 0), dtype=np.intp)
        )  # no positions
        if len(bad) and np.isfinite(expected).all():
            first = ", ".join(f"{a} {i}" for a, i in zip(axes or [f"axis {n}" for n in range(got.ndim)], bad[0]))
            ctx.note(
                f"the first non-finite gradient of {name} is at {first}; the reference's is finite there "
                "(fully masked queries and empty heads are where NaN gets in)"
            )
        ctx.expect_close(
            got,
            expected,
            f"gradient with respect to {name}",
            axes,
            "×".join(map(str, expected.shape)),
            call=call,
            float32_ok=False,
            **GRADS,
        )  # gradients are a float64 property
    from attn_kit.base.torch_support import finite_difference  # the gradients agree with the outputs (kit-side)

    analytic, numeric = finite_difference(
        lambda a, p: pair(ctx, ctx.call(FN, to_torch(a), to_torch(p), to_torch(case.masks), **case.kwargs)),
        case.activations,
        case.parameters,
        extra["grads"],
        seed=ctx.seed,
    )
    if not math.isclose(analytic, numeric, rel_tol=1e-4, abs_tol=1e-6):
        ctx.fail(
            f"the reported gradients are not the gradients of your outputs: along a random direction "
            f"they give {analytic:.8g}, finite differences of your forward outputs {numeric:.8g}"
        )


@check(
    points=3, after=("output-shapes",), concept="gradients", catches=("no-scaling", "bias-scaled", "softmax-wrong-axis", "mask-inverted")
)
def gradients_match_reference(ctx):
    """Gradients with respect to query, context, every weight and bias, and the additive bias match autograd.

    float64; the scalar is a fixed random projection of both outputs; some keys masked, no
    query fully masked.
    """
    case = make_case(ctx, B=2, Q=3, K=4, H=2, D=3, Dv=2, bias=(2, 1, 4), masks=("key_mask",))
    compare_gradients(ctx, case)


@check(points=3, after=("output-shapes",), concept="gradients", catches=("nan-gradient-masked-rows",))
def gradients_finite_on_masked_rows(ctx):
    """Gradients stay finite and right when queries are fully masked and heads see no key.

    Catches nan-gradient-masked-rows: an additive -inf mask, softmax and nan_to_num give right
    values but NaN gradients, because the NaN of the empty rows flows back through the addition.
    """
    case = masked_rows_case(ctx, bias=(3, 2, 3, 4))
    compare_gradients(ctx, case)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, C, H, D):
    """Self-attention over B×T×C activations (context = query), causal, no masks, NumPy arrays
    (bench turns them into tensors for a file that imports torch)."""
    activations = {"query": rng.normal(0.0, 1.0, size=(B, T, C)).round(6), "context": rng.normal(0.0, 1.0, size=(B, T, C)).round(6)}
    parameters = {f"w_{n}": rng.normal(0.0, C**-0.5, size=(C, H * D)).round(6) for n in "qkv"}
    parameters["w_o"] = rng.normal(0.0, (H * D) ** -0.5, size=(H * D, C)).round(6)
    parameters["b_o"] = rng.normal(0.0, 0.5, size=C).round(6)
    return (activations, parameters, {}), {"heads": H, "causal": True}
