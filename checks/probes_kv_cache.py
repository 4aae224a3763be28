"""Probes for kv-cache: whether each bias and the output projection reach a decoded token.

A decoding step returns no weights, so the question is asked of the output: three tokens are
decoded (the cache each step returns is sent back, as the checks send it), once with the given
parameters and once with one parameter changed. At the first step the one key gets all the
weight, so the query's projection shows only from the second step on: every step's output is
compared, and a parameter that changes none of them does not reach the output.
"""

from __future__ import annotations

import numpy as np

from attn_kit.diagnosis.probes import Answer, Probe, Silent, projection_answer, same

from .cases import lists

B, T, D, H = 1, 3, 4, 2


def _decoded(asker, x: np.ndarray, p: dict) -> np.ndarray:
    """The outputs of decode_step over the T tokens of x, B×T×D."""
    cache, outs = None, []
    for t in range(T):
        value = asker.call("decode_step", lists(x[:, t]), lists(p), H, cache=cache)
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise Silent("no pair")
        out, cache = value
        outs.append(asker.array(out, (B, D)))
    return np.stack(outs, axis=1)


def biases(asker) -> Answer | None:
    """Whether bq, bv, bo and Wo reach the decoded outputs: each changed alone, they must move."""
    rng = np.random.default_rng(20261206)
    x = rng.normal(0.0, 1.0, size=(B, T, D)).round(6)
    p = {f"W{n}": rng.normal(0.0, 0.5, size=(D, D)).round(6) for n in "qkvo"}
    p.update({f"b{n}": rng.normal(0.0, 0.5, size=D).round(6) for n in "qkvo"})
    base = _decoded(asker, x, p)

    def unmoved(name: str, change) -> bool:
        return same(_decoded(asker, x, dict(p, **{name: p[name] + change})), base)

    return projection_answer(unmoved, (("bq", "Wq"), ("bv", "Wv"), ("bo", "Wo")), rng.normal(0.0, 0.5, size=(D, D)).round(6))


PROBES = (Probe("biases", ("biases-ignored", "no-output-projection"), biases),)
