"""The gradient harness for PyTorch solutions: runs inside the worker, and in the kit's process
for the reference (the same code on both sides, so both see the same projection).

`ctx.call(fn, activations, parameters, masks, ..., harness="attn_kit.base.torch_support:grads")`
makes the worker call `grads(candidate_fn, activations, parameters, masks, ...)`: every floating
input becomes a fresh leaf that requires grad, the function runs, a fixed random projection of
both outputs is backpropagated, and the gradients come back as NumPy arrays in `Outcome.extra`.
Only imported for exercises that need torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from attn_kit.base.records import ATOMS

PROBE_SEED = 46_771  # the projection is fixed: a reference and a candidate get the same one


def probe(shape: tuple[int, ...], salt: int, like: torch.Tensor) -> torch.Tensor:
    """Fixed standard-normal weights of this shape, in like's dtype and on its device."""
    generator = torch.Generator().manual_seed(PROBE_SEED + salt)
    weights = torch.randn(tuple(shape), generator=generator, dtype=torch.float64)
    return weights.to(dtype=like.dtype, device=like.device)


def _leaves(values: dict, leaves: dict) -> dict:
    """A copy of the dict whose floating tensors are new leaves that require grad (recorded in leaves)."""
    copied = {}
    for name, value in values.items():
        if torch.is_tensor(value) and value.is_floating_point():
            value = value.detach().clone().requires_grad_(True)
            leaves[name] = value
        copied[name] = value
    return copied


def grads(
    fn: Callable[..., Any], activations: dict[str, Any], parameters: dict[str, Any], masks: Any, *args: Any, **kwargs: Any
) -> tuple[Any, dict[str, Any]]:
    """Run fn, backpropagate sum(output * P1) + sum(attention * P2); extra = gradients by input name.

    extra = {"grads": {name: array}, "disconnected": [names whose gradient was None, sent as
    zeros], "problem": why no gradient could be taken, or ""}. The returned value is the pair of
    outputs, detached.
    """
    leaves: dict[str, torch.Tensor] = {}
    acts = _leaves(activations, leaves)
    params = _leaves(parameters, leaves)
    value = fn(acts, params, masks, *args, **kwargs)
    empty = {name: np.zeros(tuple(leaf.shape)) for name, leaf in leaves.items()}
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(torch.is_tensor(v) for v in value)):
        return value, {
            "grads": empty,
            "disconnected": [],
            "problem": "it must return a pair of tensors (output, attention) for gradients to be taken",
        }
    output, attention = value
    parts = [(t * probe(t.shape, salt, t)).sum() for salt, t in enumerate(value, start=1) if t.requires_grad]
    detached = (output.detach(), attention.detach())
    if not parts:
        return detached, {
            "grads": empty,
            "disconnected": list(leaves),
            "problem": (
                "neither output requires grad: they were computed outside autograd (detached, converted "
                "to NumPy or made with torch.no_grad), so no gradient reaches the inputs"
            ),
        }
    found = torch.autograd.grad(sum(parts), list(leaves.values()), allow_unused=True)
    result: dict[str, Any] = {}
    disconnected: list[str] = []
    for (name, leaf), grad in zip(leaves.items(), found):
        if grad is None:
            disconnected.append(name)
            result[name] = np.zeros(tuple(leaf.shape))
        else:
            result[name] = grad.detach().cpu().numpy()
    return detached, {"grads": result, "disconnected": disconnected, "problem": ""}


# --- plain tensors, copied by value ---------------------------------------------------------------

_BY_VALUE = frozenset(
    (
        torch.float16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
    )
)


def plain_tensors(value: object) -> dict[int, torch.Tensor]:
    """{id: tensor} for the tensors in nested dicts, lists and tuples that a copy of their values
    reproduces exactly (values, dtype, device, shape, strides, requires_grad): contiguous leaf
    tensors on the CPU or the meta device, of a dtype NumPy has, with no gradient, no attributes,
    no conjugate or negative bit, and sharing storage with no other tensor found. Views and shared
    storage are left to torch's own deepcopy (which keeps them shared) and pickling (which sends
    each tensor's storage on its own); both serialise every storage, about 1 ms a call, the
    reason for this path."""
    found: dict = {}
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            if not set(map(type, item)) <= ATOMS:  # a row of plain numbers holds no tensor
                stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif type(item) is torch.Tensor:
            found[id(item)] = item
    owners: dict = {}
    for t in found.values():
        if t.device.type != "meta" and t.numel():
            owners.setdefault(t.untyped_storage().data_ptr(), []).append(id(t))
    shared = {key for keys in owners.values() if len(keys) > 1 for key in keys}
    return {
        key: t
        for key, t in found.items()
        if key not in shared
        and t.device.type in ("cpu", "meta")
        and t.dtype in _BY_VALUE
        and t.is_leaf
        and t._base is None
        and t.grad is None
        and t.layout == torch.strided
        and t.is_contiguous()
        and not t.is_conj()
        and not t.is_neg()
        and not vars(t)
    }


def by_value(t: torch.Tensor) -> tuple:
    """A pickle reduction of a plain tensor (plain_tensors): NumPy data, rebuilt by from_values."""
    array = None if t.device.type == "meta" else t.detach().numpy()
    return from_values, (array, str(t.dtype).removeprefix("torch."), tuple(t.shape), t.device.type, t.requires_grad)


def from_values(array: np.ndarray | None, dtype: str, shape: tuple[int, ...], device: str, requires_grad: bool) -> torch.Tensor:
    """The tensor by_value describes, in the receiving process."""
    if device == "meta":
        t = torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
    else:
        t = torch.from_numpy(array)
    return t.requires_grad_(requires_grad)


def settle_process() -> None:
    """PyTorch's process-wide settings, made by the sandbox wherever torch is loaded: in the kit's
    process before it starts a zygote, and in the zygote before it forks any worker.

    - torch.set_num_threads(1): the tensors the checks use are tiny, and a process forked after
      torch's OpenMP pool has started hangs at its first parallel op (reproduced: a matmul in the
      kit, then a fork, then a matmul in the worker never returns). Workers inherit the setting.
    - tensors cross to the candidate's process by value, like NumPy arrays: `import torch`
      registers shared-memory reducers with multiprocessing's pickler, so an in-place write in the
      candidate's process would land in the kit's own tensors. Those reducers are removed.
    """
    from multiprocessing.reduction import ForkingPickler

    torch.set_num_threads(1)
    reducers = vars(ForkingPickler)["_extra_reducers"]  # private class state, which typeshed leaves out
    for _type in [t for t in reducers if getattr(t, "__module__", "").startswith("torch")]:
        del reducers[_type]


# Diagnosis reruns this harness on the known-bug implementations and compares the gradients too,
# so a bug that only shows in the backward pass (nan-gradient-masked-rows) can be named.
vars(grads)["replay_in_diagnosis"] = True  # a function attribute, which mypy has no type for


# --- in the kit: are the reported gradients gradients of the forward outputs? -------------------

FD_STEP = 1e-6


def probe_loss(output: object, attention: object) -> float:
    """sum(output * P1) + sum(attention * P2) of returned values (arrays), in float64, in the kit."""
    total = 0.0
    for salt, value in enumerate((output, attention), start=1):
        arr = np.asarray(getattr(value, "array", value), dtype=np.float64)
        weights = probe(arr.shape, salt, torch.zeros((), dtype=torch.float64)).numpy()
        total += float((arr * weights).sum())
    return total


def finite_difference(
    forward: Callable[[dict, dict], tuple[Any, Any]], activations: dict, parameters: dict, grads: dict, seed: int = 0
) -> tuple[float, float]:
    """(from the reported gradients, from finite differences) of the probe loss along one random
    direction over every input that has a gradient. `forward(activations, parameters)` makes one
    call of the candidate's code and returns its (output, attention) as data; the kit computes
    everything else. A gradient harness rewritten inside the candidate's process can report
    anything, but not gradients that disagree with the outputs the kit reads."""
    rng = np.random.default_rng(PROBE_SEED + 1000 + seed)
    direction = {name: rng.standard_normal(np.shape(g)) for name, g in grads.items() if name in activations or name in parameters}

    def moved(values: dict, sign: float) -> dict:
        return {
            k: (np.asarray(v, dtype=np.float64) + sign * FD_STEP * direction[k]) if k in direction and v is not None else v
            for k, v in values.items()
        }

    analytic = float(sum((np.asarray(grads[k], dtype=np.float64) * d).sum() for k, d in direction.items()))
    plus = probe_loss(*forward(moved(activations, 1.0), moved(parameters, 1.0)))
    minus = probe_loss(*forward(moved(activations, -1.0), moved(parameters, -1.0)))
    return analytic, (plus - minus) / (2 * FD_STEP)
