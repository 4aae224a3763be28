"""The gradient harness for PyTorch solutions: runs inside the worker, and in the kit's process
for the reference (the same code on both sides, so both see the same projection).

`ctx.call(fn, activations, parameters, masks, ..., harness="attn_kit.harness_torch:grads")`
makes the worker call `grads(candidate_fn, activations, parameters, masks, ...)`: every floating
input becomes a fresh leaf that requires grad, the function runs, a fixed random projection of
both outputs is backpropagated, and the gradients come back as NumPy arrays in `Outcome.extra`.
Only imported for exercises that need torch.
"""

from __future__ import annotations

import numpy as np
import torch

PROBE_SEED = 46_771        # the projection is fixed: a reference and a candidate get the same one


def probe(shape, salt: int, like: torch.Tensor) -> torch.Tensor:
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


def grads(fn, activations, parameters, masks, *args, **kwargs):
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
        return value, {"grads": empty, "disconnected": [], "problem": "it must return a pair of tensors "
                       "(output, attention) for gradients to be taken"}
    output, attention = value
    parts = [(t * probe(t.shape, salt, t)).sum() for salt, t in enumerate(value, start=1) if t.requires_grad]
    detached = (output.detach(), attention.detach())
    if not parts:
        return detached, {"grads": empty, "disconnected": list(leaves), "problem": (
            "neither output requires grad: they were computed outside autograd (detached, converted "
            "to NumPy or made with torch.no_grad), so no gradient reaches the inputs")}
    found = torch.autograd.grad(sum(parts), list(leaves.values()), allow_unused=True)
    result, disconnected = {}, []
    for (name, leaf), grad in zip(leaves.items(), found):
        if grad is None:
            disconnected.append(name)
            result[name] = np.zeros(tuple(leaf.shape))
        else:
            result[name] = grad.detach().cpu().numpy()
    return detached, {"grads": result, "disconnected": disconnected, "problem": ""}


# Diagnosis reruns this harness on the known-bug implementations and compares the gradients too,
# so a bug that only shows in the backward pass (nan-gradient-masked-rows) can be named.
grads.replay_in_diagnosis = True
