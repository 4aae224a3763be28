"""Probes for rope: the rotation read off unit vectors, and mha-screen's layer probes.

`apply_rope` is asked to rotate the unit vectors e_0 .. e_{hd-1} (one a head) at position 1: the
reference turns e_i into cos θ_i·e_i + sin θ_i·e_{i+hd/2}. Which feature each unit vector moves
into tells the pairs (half split or adjacent), the sign of its sine tells the direction, and its
angle tells the frequency. The layer probes (scale, biases, mask, an empty row) are mha-screen's,
asked with every position 0, where a right rotation is the identity, so that the scores they read
are the raw dot products whatever the rotation does (a layer that ignores its positions and
rotates by 0..T-1 is not readable there: those probes stay silent).
"""

from __future__ import annotations

import numpy as np

from attn_kit.diagnosis.probes import Answer, Probe

from .cases import lists
from .probes_mha_screen import layer_probes

HD = 8  # head width of the rotation probe: four pairs, angles 1, 0.1, 0.01, 0.001 at position 1
BASE = 10000.0
RTOL = ATOL = 2e-6  # float32 rotations (production tables are float32) pass


def rope_call(asker, x, p, H, mask, weights=True):
    """rope_attention(x, params, H, positions=[0]*T, mask=..., return_weights=weights)."""
    T = np.shape(x)[1]
    return asker.call("rope_attention", lists(x), lists(p), H, positions=[0] * T, mask=lists(mask), return_weights=weights)


def _rotation(pairs: str, sign: float, theta: np.ndarray) -> np.ndarray:
    """The hd×hd matrix whose row i is what e_i becomes at position 1."""
    half = HD // 2
    out = np.zeros((HD, HD))
    for i in range(half):
        a, b = (i, i + half) if pairs == "half" else (2 * i, 2 * i + 1)
        c, s = np.cos(theta[i]), sign * np.sin(theta[i])
        out[a, a], out[a, b] = c, s
        out[b, b], out[b, a] = c, -s
    return out


THETA = BASE ** (-2.0 * np.arange(HD // 2) / HD)
ROTATIONS = (  # (bug, the matrix at position 1, what it does in words)
    (None, _rotation("half", 1.0, THETA), ""),
    ("rope-pairs-interleaved", _rotation("adjacent", 1.0, THETA), "rotated with e_{i+1} (adjacent pairs), not with e_{i+hd/2}"),
    ("rope-sign-flipped", _rotation("half", -1.0, THETA), "rotated by -θ_i: e_0 at position 1 gives -sin(1) in feature hd/2, not +sin(1)"),
)


def rotation(asker) -> Answer | None:
    """e_0 .. e_{hd-1} at position 1 (each its own head), read against the reference, the adjacent
    pairs and the flipped sign; the same pairs and sign at the wrong angles is a wrong frequency."""
    x = np.eye(HD).reshape(1, HD, 1, HD)
    got = asker.array(asker.call("apply_rope", lists(x), [1]), (1, HD, 1, HD)).reshape(HD, HD)
    if not np.isfinite(got).all():
        return None
    for bug, matrix, said in ROTATIONS:
        if np.allclose(got, matrix, rtol=RTOL, atol=ATOL):
            return None if bug is None else Answer(bug, f"apply_rope at position 1 turns each unit vector e_i {said}")
    return _frequency(got)


def _frequency(got: np.ndarray) -> Answer | None:
    """Half-split pairs turned the right way, pair 0 by 1 radian (θ_0 = 1 in every exponent), the
    others by angles that are not base^(-2i/hd): rope-frequency-exponent."""
    half = HD // 2
    structure = np.zeros((HD, HD), bool)
    for i in range(half):
        structure[[i, i, i + half, i + half], [i, i + half, i + half, i]] = True
    if np.abs(got[~structure]).max() > ATOL or not np.allclose(np.linalg.norm(got, axis=1), 1.0, rtol=RTOL, atol=ATOL):
        return None
    angles = np.arctan2(got[np.arange(half), np.arange(half) + half], got[np.arange(half), np.arange(half)])
    if not np.allclose(got[half:, :half], -got[:half, half:], rtol=RTOL, atol=ATOL) or abs(angles[0] - 1.0) > 1e-5:
        return None  # not one rotation a pair, or pair 0 not turned by +1 radian: another question
    if np.allclose(angles, THETA, rtol=1e-5, atol=1e-6):
        return None
    said = ", ".join(f"{a:.4g}" for a in angles)
    right = ", ".join(f"{t:.4g}" for t in THETA)
    return Answer(
        "rope-frequency-exponent",
        f"apply_rope at position 1 turns the pairs of a head of width {HD} by {said} radians (the reference: {right}, base^(-2i/hd))",
    )


PROBES = (
    Probe("rotation", ("rope-pairs-interleaved", "rope-sign-flipped", "rope-frequency-exponent"), rotation),
    *layer_probes(rope_call, widths=(8, 12)),  # head widths 4 and 6: rotations need even ones
)
