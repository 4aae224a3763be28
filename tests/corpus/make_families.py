"""Writes tests/corpus/families/: solutions with bug-family variants, and expected.toml beside them.

Written from SPEC.md and the exercise statements only (not from solutions/*/bugs): a few correct
implementations of our own in several styles (NumPy, einsum, plain lists with loops), each with
switches that put in one classic mistake in one of its forms: a subset of the weights transposed
or biases dropped, another fill value, with or without a guard for empty rows, an off-by-one on
either side, a mistake in one function only, float32, an exception bug beside a plain one, and
deviations no catalogue id describes. Run it to rewrite the folder:

    python tests/corpus/make_families.py
"""

from __future__ import annotations

import itertools
from pathlib import Path

OUT = Path(__file__).resolve().parent / "families"

# --- mha-screen, NumPy -----------------------------------------------------------------------------

SOFTMAX = {
    "ok": """\
    if ok is not None:
        s = np.where(ok, s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    z = e.sum(axis=-1, keepdims=True)
    return e / np.where(z > 0, z, 1.0)
""",
    "weak": """\
    if ok is not None:
        s = np.where(ok, s, FILL)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    GUARD
    return w
""",
    "additive": """\
    if ok is not None:
        s = s + np.where(ok, 0.0, FILL)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
""",
    "nan": """\
    if ok is not None:
        s = np.where(ok, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
""",
    "uniform": """\
    if ok is not None:
        s = np.where(ok, s, -1e9)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
""",
    "maxblocked": """\
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    if ok is not None:
        e = e * ok
    z = e.sum(axis=-1, keepdims=True)
    return e / np.where(z > 0, z, 1.0)
""",
    "overflow": """\
    if ok is not None:
        s = np.where(ok, s, -np.inf)
    e = np.exp(s)
    z = e.sum(axis=-1, keepdims=True)
    return e / np.where(z > 0, z, 1.0)
""",
}

SPLIT = {
    "ok": "y.reshape(B, T, H, hd).transpose(0, 2, 1, 3)",
    "reshape": "y.reshape(B, H, T, hd)",
    "interleaved": "y.reshape(B, T, hd, H).transpose(0, 3, 1, 2)",
}
SCALE = {"hd": "np.sqrt(hd)", "none": "1.0", "D": "np.sqrt(D)", "hd2": "hd", "times": "(1.0 / np.sqrt(hd))"}
CAUSAL = {"ok": "j <= i", "excl": "j < i", "plus1": "j <= i + 1"}


def mha_numpy(transposed=(), dropped=(), scale="hd", softmax="ok", fill="-10.0", guard=False, causal="ok",
              padding="keys", split="ok", axis=-1, out_proj=True, invert_in_mha=False, dtype="float64",
              offcat=None, causal_style="compare") -> str:
    body = SOFTMAX[softmax].replace("FILL", fill)
    body = body.replace("    GUARD\n", "    if ok is not None:\n        w = w * ok.any(axis=-1, keepdims=True)\n"
                        if guard else "")
    if axis != -1:      # normalised over the queries of each key
        body = body.replace("axis=-1", "axis=-2")

    def project(name, bias, src="x"):
        w = f'np.asarray(params["{name}"], dtype=DT)' + (".T" if name in transposed else "")
        line = f"{src} @ {w}"
        if bias not in dropped:
            line += f' + (0.0 if params.get("{bias}") is None else np.asarray(params["{bias}"], dtype=DT))'
        return line

    if causal_style == "tri":
        k = {"ok": 0, "excl": -1, "plus1": 1}[causal]
        causal_code = f"    m = np.tril(np.ones((T, T), dtype=bool), k={k})\n"
    else:
        causal_code = f"    i = np.arange(T)[:, None]\n    j = np.arange(T)[None, :]\n    m = {CAUSAL[causal]}\n"
    pad = ("np.arange(T)[None, None, :] < n[:, None, None]" if padding == "keys" else
           "(np.arange(T)[None, :, None] < n[:, None, None]) & (np.arange(T)[None, None, :] < n[:, None, None])")
    scores = f"q @ k.transpose(0, 1, 3, 2) / DT({SCALE[scale]})"
    if offcat == "softcap":
        scores = f"5.0 * np.tanh(({scores}) / 5.0)"
    allowed = "None if mask is None else " + ("~" if invert_in_mha else "") + "np.asarray(mask, dtype=bool)[:, None]"
    tail = f"    out = {project('Wo', 'bo', 'merged')}\n" if out_proj else "    out = merged\n"
    if offcat == "residual":
        tail += "    out = out + x\n"
    sharpen = ("    w = w * w\n    w = w / np.where(w.sum(axis=-1, keepdims=True) > 0, w.sum(axis=-1, keepdims=True), 1.0)\n"
               if offcat == "squared" else "")
    return f'''import numpy as np

DT = np.{dtype}


def _softmax(s, ok=None):
{body}

def stable_softmax(scores, allowed=None):
    s = np.array(scores, dtype=DT)
    ok = None if allowed is None else np.array(allowed, dtype=bool)
    return _softmax(s, ok).tolist()


def causal_mask(B, T):
{causal_code}    return np.broadcast_to(m, (B, T, T)).copy()


def padding_mask(lengths, T):
    n = np.asarray(lengths)
    return np.broadcast_to({pad}, (len(n), T, T)).copy()


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=DT)
    B, T, D = x.shape
    H = num_heads
    if H < 1 or D % H != 0:
        raise ValueError(f"D={{D}} is not divisible by num_heads={{H}}")
    hd = D // H

    def heads(y):
        return {SPLIT[split]}

    q = heads({project("Wq", "bq")})
    k = heads({project("Wk", "bk")})
    v = heads({project("Wv", "bv")})
    scores = {scores}
    allowed = {allowed}
    w = _softmax(scores, allowed)
{sharpen}    merged = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
{tail}    return (out, w) if return_weights else out
'''


# --- mha-screen, einsum ---------------------------------------------------------------------------

def mha_einsum(transposed=(), dropped=(), scale="hd", fill=None, guard=True, offcat=None, nan_rows=False) -> str:
    def proj(name, bias, src="x"):
        spec = "btd,ed->bte" if name in transposed else "btd,de->bte"
        line = f'np.einsum("{spec}", {src}, np.asarray(p["{name}"], float))'
        if bias not in dropped:
            line = f'_bias({line}, p.get("{bias}"))'
        return line
    fill_line = ("        s = np.where(allowed, s, -np.inf)\n" if fill is None else
                 f"        s = np.where(allowed, s, {fill})\n")
    guard_line = "        w = np.where(allowed.any(-1, keepdims=True), w, 0.0)\n" if guard and fill is not None else ""
    if nan_rows:
        top = "    top = s.max(-1, keepdims=True)\n"
    else:
        top = "    top = s.max(-1, keepdims=True)\n    top[~np.isfinite(top)] = 0.0\n"
    extra = "    out = out + x\n" if offcat == "residual" else ""
    return f'''import numpy as np


def _bias(y, b):
    return y if b is None else y + np.asarray(b, float)


def _weights(s, allowed):
    if allowed is not None:
{fill_line}{top}    w = np.exp(s - top)
    z = w.sum(-1, keepdims=True)
    w = w / np.where(z == 0, 1.0, z)
    if allowed is not None:
{guard_line}        pass
    return w


def stable_softmax(scores, allowed=None):
    s = np.asarray(scores, float)
    a = None if allowed is None else np.asarray(allowed, bool)
    return list(_weights(s.copy(), a))


def causal_mask(B, T):
    return np.tile(np.tril(np.ones((T, T), bool)), (B, 1, 1))


def padding_mask(lengths, T):
    keys = np.arange(T)[None, :] < np.asarray(lengths)[:, None]
    return np.repeat(keys[:, None, :], T, axis=1)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    p = params
    x = np.asarray(x, float)
    B, T, D = x.shape
    if num_heads <= 0 or D % num_heads:
        raise ValueError("model width not divisible by the number of heads")
    H, hd = num_heads, D // num_heads
    q = {proj("Wq", "bq")}.reshape(B, T, H, hd)
    k = {proj("Wk", "bk")}.reshape(B, T, H, hd)
    v = {proj("Wv", "bv")}.reshape(B, T, H, hd)
    s = np.einsum("bihc,bjhc->bhij", q, k) / {SCALE[scale]}
    allowed = None if mask is None else np.asarray(mask, bool)[:, None, :, :]
    w = _weights(s, allowed)
    merged = np.einsum("bhij,bjhc->bihc", w, v).reshape(B, T, D)
    out = {proj("Wo", "bo", "merged")}
{extra}    return (out, w) if return_weights else out
'''


# --- mha-screen, plain lists ----------------------------------------------------------------------

def mha_lists(transposed=(), dropped=(), scale="hd", exp="stable", fill=None, causal="ok", offcat=None) -> str:
    scale_expr = {"hd": "math.sqrt(hd)", "none": "1.0", "D": "math.sqrt(D)", "hd2": "hd"}[scale]
    if exp == "stable":
        soft = """\
    kept = [s for s, a in zip(scores, allowed) if a]
    if not kept:
        return [0.0] * len(scores)
    top = max(kept)
    e = [math.exp(s - top) if a else 0.0 for s, a in zip(scores, allowed)]
"""
    elif exp == "raw":            # no shift: math.exp raises OverflowError above about 709
        soft = """\
    if not any(allowed):
        return [0.0] * len(scores)
    e = [math.exp(s) if a else 0.0 for s, a in zip(scores, allowed)]
"""
    else:                         # a weak fill value instead of leaving blocked keys out
        soft = f"""\
    if not any(allowed):
        return [0.0] * len(scores)
    filled = [s if a else {fill} for s, a in zip(scores, allowed)]
    top = max(filled)
    e = [math.exp(s - top) for s in filled]
"""
    cond = CAUSAL[causal]
    extra = "    out = [[[o + xi for o, xi in zip(orow, xrow)] for orow, xrow in zip(ob, xb)] for ob, xb in zip(out, x)]\n" \
        if offcat == "residual" else ""

    def w_expr(name):
        return f'_t(params["{name}"])' if name in transposed else f'params["{name}"]'

    def b_expr(name):
        return "None" if name in dropped else f'params.get("{name}")'
    return f'''import math


def _t(m):
    return [list(col) for col in zip(*m)]


def _linear(rows, W, b):
    W = [list(map(float, r)) for r in W]
    out = []
    for r in rows:
        y = [sum(r[i] * W[i][j] for i in range(len(r))) for j in range(len(W[0]))]
        if b is not None:
            y = [v + float(c) for v, c in zip(y, b)]
        out.append(y)
    return out


def stable_softmax(scores, allowed=None):
    scores = [float(s) for s in scores]
    allowed = [True] * len(scores) if allowed is None else [bool(a) for a in allowed]
{soft}    total = sum(e)
    return [v / total for v in e]


def causal_mask(B, T):
    return [[[{cond} for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    x = [[[float(v) for v in row] for row in seq] for seq in x]
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads
    out, weights = [], []
    for b in range(B):
        q = _linear(x[b], {w_expr("Wq")}, {b_expr("bq")})
        k = _linear(x[b], {w_expr("Wk")}, {b_expr("bk")})
        v = _linear(x[b], {w_expr("Wv")}, {b_expr("bv")})
        concat = [[0.0] * D for _ in range(T)]
        wb = []
        for h in range(num_heads):
            lo = h * hd
            wh = []
            for i in range(T):
                s = [sum(q[i][lo + c] * k[j][lo + c] for c in range(hd)) / {scale_expr} for j in range(T)]
                allowed = [True] * T if mask is None else [bool(mask[b][i][j]) for j in range(T)]
                w = stable_softmax(s, allowed)
                wh.append(w)
                for c in range(hd):
                    concat[i][lo + c] = sum(w[j] * v[j][lo + c] for j in range(T))
            wb.append(wh)
        out.append(_linear(concat, {w_expr("Wo")}, {b_expr("bo")}))
        weights.append(wb)
{extra}    return (out, weights) if return_weights else out
'''


# --- rope ----------------------------------------------------------------------------------------

def rope_numpy(exponent="-2.0 * i / hd", base_expr="base", positions_in_apply=True, positions_in_attention=True,
               sign=1, transposed=(), dropped=(), offcat=None) -> str:
    pos_apply = "np.asarray(positions, dtype=float)" if positions_in_apply else "np.arange(x.shape[-2], dtype=float)"
    pos_attn = "np.arange(T) if positions is None else positions" if positions_in_attention else "np.arange(T)"
    rot = "-" if sign < 0 else ""
    extra = "    out = out + x\n" if offcat == "residual" else ""

    def proj(name, bias, src="x"):
        w = f'np.asarray(params["{name}"], dtype=float)' + (".T" if name in transposed else "")
        line = f"{src} @ {w}"
        if bias not in dropped:
            line = f'_add({line}, params.get("{bias}"))'
        return line
    return f'''import numpy as np


def apply_rope(x, positions, base=10000.0):
    x = np.asarray(x, dtype=float)
    hd = x.shape[-1]
    if hd % 2 != 0:
        raise ValueError("head width must be even for rotary embeddings")
    half = hd // 2
    i = np.arange(half)
    theta = ({base_expr}) ** ({exponent})
    ang = {rot}{pos_apply}[:, None] * theta[None, :]
    c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def _add(y, b):
    return y if b is None else y + np.asarray(b, dtype=float)


def rope_attention(x, params, num_heads, positions=None, mask=None, return_weights=False):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape
    if num_heads < 1 or D % num_heads:
        raise ValueError("D is not divisible by num_heads")
    hd = D // num_heads
    if hd % 2:
        raise ValueError("head width must be even")
    pos = {pos_attn}

    def split(y):
        return y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)

    q = apply_rope(split({proj("Wq", "bq")}), pos)
    k = apply_rope(split({proj("Wk", "bk")}), pos)
    v = split({proj("Wv", "bv")})
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    if mask is not None:
        ok = np.asarray(mask, dtype=bool)[:, None]
        s = np.where(ok, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    z = e.sum(-1, keepdims=True)
    w = e / np.where(z > 0, z, 1.0)
    merged = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = {proj("Wo", "bo", "merged")}
{extra}    return (out, w) if return_weights else out
'''


# --- sliding-window ------------------------------------------------------------------------------------

def window_numpy(band="i - window < j <= i", fill="-np.inf", style="full", full="chunks") -> str:
    if style == "loop":
        lo = {"i - window < j <= i": "max(0, i - window + 1)", "i - window <= j <= i": "max(0, i - window)",
              "i - window + 1 < j <= i": "max(0, i - window + 2)"}[band]
        return f'''import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be >= 1")
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    B, H, T, d = q.shape
    out = np.zeros((B, H, T, v.shape[-1]))
    for i in range(T):
        lo = {lo}
        s = np.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, lo:i + 1]) / np.sqrt(d)
        s = s - s.max(-1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(-1, keepdims=True)
        out[:, :, i] = np.einsum("bhj,bhjd->bhd", w, v[:, :, lo:i + 1])
    return out
'''
    return f'''import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be >= 1")
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    B, H, T, d = q.shape
    out = np.zeros((B, H, T, v.shape[-1]))
    step = {"32" if full == "chunks" else "T"}
    for a in range(0, T, step):
        e = min(T, a + step)
        kb = {"max(0, a - window - 1)" if full == "chunks" else "0"}
        s = q[:, :, a:e] @ k[:, :, kb:e].transpose(0, 1, 3, 2) / np.sqrt(d)
        i = np.arange(a, e)[:, None]
        j = np.arange(kb, e)[None, :]
        ok = ({band.replace(" < j <= i", " < j) & (j <= i").replace(" <= j <= i", " <= j) & (j <= i")})
        s = np.where(ok, s, {fill})
        s = s - s.max(-1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(-1, keepdims=True)
        out[:, :, a:e] = w @ v[:, :, kb:e]
    return out
'''


# --- attention-backward --------------------------------------------------------------------------------

def backward_numpy(scale_dq=True, scale_dk=True, jacobian="ok", dv="ok") -> str:
    dq = "dS @ k" + (" * c" if scale_dq else "")
    dk = "np.swapaxes(dS, -1, -2) @ q" + (" * c" if scale_dk else "")
    ds = "P * (dP - (P * dP).sum(-1, keepdims=True))" if jacobian == "ok" else "P * dP"
    dvl = "np.swapaxes(P, -1, -2) @ dout" if dv == "ok" else "P @ dout"
    return f'''import numpy as np


def attention_backward(q, k, v, dout, mask=None):
    q, k, v, dout = (np.asarray(a, dtype=float) for a in (q, k, v, dout))
    c = 1.0 / np.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * c
    if mask is not None:
        ok = np.asarray(mask, dtype=bool)[:, None]
        s = np.where(ok, s, -np.inf)
    top = s.max(-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(s - top)
    z = e.sum(-1, keepdims=True)
    P = e / np.where(z > 0, z, 1.0)
    dv = {dvl}
    dP = dout @ np.swapaxes(v, -1, -2)
    dS = {ds}
    dq = {dq}
    dk = {dk}
    return dq, dk, dv
'''


# --- paged-attention -----------------------------------------------------------------------------------

def paged_lists(order="table", length="n", style="numpy", exp="numpy") -> str:
    blocks = {
        "table": "list(table)",
        "reversed": "list(table)[::-1]",
        "used-sorted": "sorted(table[:used]) + list(table[used:])",
        "used-reversed": "list(table[:used])[::-1] + list(table[used:])",
        "sorted": "sorted(table)",
        "pool": "list(range(len(table)))",
    }[order]
    count = {"n": "n", "short": "max(n - 1, 0)"}[length]
    soft = ("""        s = s - s.max(1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(1, keepdims=True)""" if exp == "numpy" else """\
        w = np.array([[math.exp(x) for x in row] for row in s.tolist()])   # no shift
        w = w / w.sum(1, keepdims=True)""")
    return f'''import math

import numpy as np


def paged_attention(q, k_pool, v_pool, block_tables, context_lens):
    q = np.asarray(q, dtype=float)
    B, H, d = q.shape
    bs = np.shape(k_pool)[1]
    out = np.zeros((B, H, np.shape(v_pool)[-1]))
    for b in range(B):
        n = int(context_lens[b])
        table = [int(x) for x in block_tables[b]]
        used = (n + bs - 1) // bs
        order = {blocks}
        ks, vs = [], []
        for t in range({count}):
            blk = order[t // bs]
            ks.append(np.asarray(k_pool[blk][t % bs], dtype=float))
            vs.append(np.asarray(v_pool[blk][t % bs], dtype=float))
        if not ks:
            continue
        K, V = np.stack(ks), np.stack(vs)             # n×H×d
        s = np.einsum("hd,nhd->hn", q[b], K) / math.sqrt(d)
{soft}
        out[b] = np.einsum("hn,nhd->hd", w, V)
    return out
'''


# --- gqa, NumPy -------------------------------------------------------------------------------------

def gqa_numpy(fill="-np.inf", guard=False, transposed=(), dropped=(), scale="np.sqrt(hd)", added=False) -> str:
    """Each key/value head repeated for its group; blocked scores set to `fill` (or `fill` added to
    them), with an explicit guard giving a query with no allowed key zero weights when `guard`."""
    def w(name):
        return f'np.asarray(params["{name}"], dtype=float)' + (".T" if name in transposed else "")

    def b(name):
        return "" if name in dropped else f' + np.asarray(params.get("{name}") if params.get("{name}") is not None else 0.0)'

    masked = f"s + np.where(ok, 0.0, {fill})" if added else f"np.where(ok, s, {fill})"
    guard_code = "        p = np.where(ok.any(-1, keepdims=True), p, 0.0)   # no allowed key: zero weights\n" if guard else ""
    return f'''import numpy as np


def grouped_query_attention(x, params, num_heads, num_kv_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape
    if num_kv_heads < 1 or num_heads % num_kv_heads or D % num_heads:
        raise ValueError("bad head counts")
    hd = D // num_heads
    g = num_heads // num_kv_heads
    q = (x @ {w("Wq")}{b("bq")}).reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)
    k = (x @ {w("Wk")}{b("bk")}).reshape(B, T, num_kv_heads, hd).transpose(0, 2, 1, 3)
    v = (x @ {w("Wv")}{b("bv")}).reshape(B, T, num_kv_heads, hd).transpose(0, 2, 1, 3)
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / {scale}
    if mask is None:
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    else:
        ok = np.asarray(mask, dtype=bool)[:, None, :, :]
        s = {masked}
        top = s.max(-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        p = np.exp(s - top)
        z = p.sum(-1, keepdims=True)
        p = p / np.where(z > 0, z, 1.0)
{guard_code}    out = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ {w("Wo")}{b("bo")}
    return (out, p) if return_weights else out
'''


# --- the corpus: file name -> (exercise, source, expected catalogue ids, off-catalogue deviation) ------

WT, BI, FV, AM = "weights-transposed", "biases-ignored", "fill-value-too-weak", "additive-mask-leaks"
C1, NS, MW, SO = "causal-off-by-one", "no-scaling", "scale-by-model-width", "softmax-overflow"
NAN, HI, PQ, MI = "blocked-row-nan", "heads-interleaved", "padding-masks-queries", "mask-inverted"


def corpus() -> dict[str, tuple]:
    files: dict[str, tuple] = {}

    def add(name, exercise, source, bugs=(), offcat=""):
        assert name not in files, name
        files[name] = (exercise, source, list(bugs), offcat)

    mha = "mha-screen"
    # a subset of the weights used transposed
    for sub in [("Wq",), ("Wo",), ("Wq", "Wo"), ("Wk", "Wv"), ("Wv",), ("Wk", "Wo"), ("Wq", "Wk", "Wv")]:
        add(f"np_transposed_{'_'.join(sub).lower()}.py", mha, mha_numpy(transposed=sub), [WT])
    for sub in [("Wk",), ("Wv", "Wo")]:
        add(f"einsum_transposed_{'_'.join(sub).lower()}.py", mha, mha_einsum(transposed=sub), [WT])
    add("lists_transposed_wo.py", mha, mha_lists(transposed=("Wo",)), [WT])
    # a subset of the biases dropped
    for sub in [("bo",), ("bk", "bv"), ("bq", "bo"), ("bv",), ("bq", "bk", "bv")]:
        add(f"np_dropped_{'_'.join(sub)}.py", mha, mha_numpy(dropped=sub), [BI])
    for sub in [("bo",), ("bq", "bk", "bv")]:
        add(f"einsum_dropped_{'_'.join(sub)}.py", mha, mha_einsum(dropped=sub), [BI])
    add("lists_dropped_bv_bo.py", mha, mha_lists(dropped=("bv", "bo")), [BI])
    # fill values, with and without a guard for empty rows
    for fill, guard in [("-10.0", False), ("-10.0", True), ("-5.0", True), ("-1e-12", True), ("-1.0", False),
                        ("0.0", True)]:
        tag = fill.replace("-", "m").replace(".", "p")
        add(f"np_fill_{tag}{'_guarded' if guard else ''}.py", mha, mha_numpy(softmax="weak", fill=fill, guard=guard),
            [FV])
    add("einsum_fill_m10_guarded.py", mha, mha_einsum(fill="-10.0"), [FV])
    add("lists_fill_m5.py", mha, mha_lists(exp="fill", fill="-5.0"), [FV])
    # constants in no list of the kit's: fitted from the file's own outputs
    add("np_fill_m7_guarded.py", mha, mha_numpy(softmax="weak", fill="-7.0", guard=True), [FV])
    add("np_fill_m2p5.py", mha, mha_numpy(softmax="weak", fill="-2.5"), [FV])
    add("np_additive_m10.py", mha, mha_numpy(softmax="additive", fill="-10.0"), [AM])
    for fill in ["-1e9", "-1e4"]:
        add(f"np_additive_{fill.replace('-', 'm')}.py", mha, mha_numpy(softmax="additive", fill=fill), [AM])
    # either side of the causal diagonal, in two constructions
    for causal in ["excl", "plus1"]:
        add(f"np_causal_{causal}.py", mha, mha_numpy(causal=causal), [C1])
        add(f"np_causal_{causal}_tril.py", mha, mha_numpy(causal=causal, causal_style="tri"), [C1])
    add("lists_causal_excl.py", mha, mha_lists(causal="excl"), [C1])
    # the mask inverted in one function only
    add("np_mask_inverted_in_mha_only.py", mha, mha_numpy(invert_in_mha=True), [MI])
    # two or three bugs, variants among them
    add("np_transposed_wq_wo_no_scaling.py", mha, mha_numpy(transposed=("Wq", "Wo"), scale="none"), [WT, NS])
    add("np_dropped_bo_causal_excl.py", mha, mha_numpy(dropped=("bo",), causal="excl"), [BI, C1])
    add("np_fill_m10_guarded_model_width.py", mha, mha_numpy(softmax="weak", fill="-10.0", guard=True, scale="D"),
        [FV, MW])
    add("np_additive_m1e4_interleaved.py", mha, mha_numpy(softmax="additive", fill="-1e4", split="interleaved"),
        [AM, HI])
    # (bk alone is never a visible bug: it adds the same q·bk to every score of a query's row)
    add("np_transposed_wv_dropped_bq_plus1.py", mha, mha_numpy(transposed=("Wv",), dropped=("bq",), causal="plus1"),
        [WT, BI, C1])
    add("np_dropped_bq_padding_queries.py", mha, mha_numpy(dropped=("bq",), padding="queries"), [BI, PQ])
    add("einsum_transposed_wq_model_width.py", mha, mha_einsum(transposed=("Wq",), scale="D"), [WT, MW])
    add("lists_transposed_wk_no_scaling.py", mha, mha_lists(transposed=("Wk",), scale="none"), [WT, NS])
    add("lists_dropped_bq_causal_excl.py", mha, mha_lists(dropped=("bq",), causal="excl"), [BI, C1])
    # the scale factor: each constant SPEC names, beside another bug, and one no id describes
    DS = "double-scaling"
    add("np_scale_hd_transposed_wq.py", mha, mha_numpy(scale="hd2", transposed=("Wq",)), [DS, WT])
    add("np_scale_model_width_dropped_bo.py", mha, mha_numpy(scale="D", dropped=("bo",)), [MW, BI])
    add("np_scale_none_causal_plus1.py", mha, mha_numpy(scale="none", causal="plus1"), [NS, C1])
    add("np_scale_multiplied.py", mha, mha_numpy(scale="times"), [], "multiplies the scores by sqrt(hd)")
    add("np_scale_multiplied_causal_excl.py", mha, mha_numpy(scale="times", causal="excl"), [C1],
        "multiplies the scores by sqrt(hd)")
    # float32 solutions
    add("np32_transposed_wo.py", mha, mha_numpy(transposed=("Wo",), dtype="float32"), [WT])
    add("np32_dropped_bk_bv.py", mha, mha_numpy(dropped=("bk", "bv"), dtype="float32"), [BI])
    add("np32_no_scaling.py", mha, mha_numpy(scale="none", dtype="float32"), [NS])
    add("np32_fill_m10_guarded.py", mha, mha_numpy(softmax="weak", fill="-10.0", guard=True, dtype="float32"), [FV])
    add("np32_causal_excl_transposed_wq.py", mha, mha_numpy(causal="excl", transposed=("Wq",), dtype="float32"),
        [C1, WT])
    # an exception or NaN bug beside a plain one
    add("lists_overflow_no_scaling.py", mha, mha_lists(exp="raw", scale="none"), [SO, NS])
    add("lists_overflow_dropped_bo.py", mha, mha_lists(exp="raw", dropped=("bo",)), [SO, BI])
    add("lists_overflow_transposed_wq.py", mha, mha_lists(exp="raw", transposed=("Wq",)), [SO, WT])
    add("np_overflow_dropped_bv.py", mha, mha_numpy(softmax="overflow", dropped=("bv",)), [SO, BI])
    add("np_nan_rows_transposed_wo.py", mha, mha_numpy(softmax="nan", transposed=("Wo",)), [NAN, WT])
    add("einsum_nan_rows_dropped_bq_bv.py", mha, mha_einsum(dropped=("bq", "bv"), nan_rows=True), [NAN, BI])
    add("np_nan_rows_causal_plus1.py", mha, mha_numpy(softmax="nan", causal="plus1"), [NAN, C1])
    # deviations outside the catalogue, alone and beside a catalogue bug acting elsewhere
    add("np_residual.py", mha, mha_numpy(offcat="residual"), [], "adds the input to the output (a residual)")
    add("np_softcap.py", mha, mha_numpy(offcat="softcap"), [], "soft-caps the scores with 5·tanh(s/5)")
    add("np_squared_weights.py", mha, mha_numpy(offcat="squared"), [], "squares the weights and renormalises")
    add("einsum_residual.py", mha, mha_einsum(offcat="residual"), [], "adds the input to the output (a residual)")
    add("np_residual_causal_excl.py", mha, mha_numpy(offcat="residual", causal="excl"), [C1],
        "adds the input to the output (a residual)")
    add("np_softcap_padding_queries.py", mha, mha_numpy(offcat="softcap", padding="queries"), [PQ],
        "soft-caps the scores with 5·tanh(s/5)")
    add("np_squared_causal_plus1.py", mha, mha_numpy(offcat="squared", causal="plus1"), [C1],
        "squares the weights and renormalises")
    add("lists_residual_overflow.py", mha, mha_lists(offcat="residual", exp="raw"), [SO],
        "adds the input to the output (a residual)")
    add("np_residual_fill_m10.py", mha, mha_numpy(offcat="residual", softmax="weak", fill="-10.0"), [FV],
        "adds the input to the output (a residual)")
    # correct files in these styles
    add("np_correct.py", mha, mha_numpy(), [])
    add("np32_correct.py", mha, mha_numpy(dtype="float32"), [])
    add("einsum_correct.py", mha, mha_einsum(), [])
    add("lists_correct.py", mha, mha_lists(), [])

    rope = "rope"
    RF, RP, RS = "rope-frequency-exponent", "rope-positions-ignored", "rope-sign-flipped"
    for tag, exponent in [("i_over_hd", "-1.0 * i / hd"), ("floordiv", "(-2 * i) // hd"),
                          ("index_plus_one", "-2.0 * (i + 1) / hd")]:
        add(f"rope_exponent_{tag}.py", rope, rope_numpy(exponent=exponent), [RF])
    add("rope_base_1000.py", rope, rope_numpy(base_expr="1000.0"), [RF])
    add("rope_base_500000.py", rope, rope_numpy(base_expr="500000.0"), [RF])
    add("rope_positions_ignored_in_attention.py", rope, rope_numpy(positions_in_attention=False), [RP])
    add("rope_positions_ignored_in_apply.py", rope, rope_numpy(positions_in_apply=False), [RP])
    add("rope_transposed_wq_wk.py", rope, rope_numpy(transposed=("Wq", "Wk")), [WT])
    add("rope_dropped_bk.py", rope, rope_numpy(dropped=("bk",)), [BI])
    add("rope_sign_dropped_bo.py", rope, rope_numpy(sign=-1, dropped=("bo",)), [RS, BI])
    add("rope_exponent_transposed_wo.py", rope, rope_numpy(exponent="-1.0 * i / hd", transposed=("Wo",)), [RF, WT])
    add("rope_residual.py", rope, rope_numpy(offcat="residual"), [], "adds the input to the output (a residual)")
    add("rope_correct.py", rope, rope_numpy(), [])

    win = "sliding-window"
    WO = "window-off-by-one"
    add("window_loop_one_more.py", win, window_numpy("i - window <= j <= i", style="loop"), [WO])
    add("window_loop_one_fewer.py", win, window_numpy("i - window + 1 < j <= i", style="loop"), [WO])
    add("window_band_one_more.py", win, window_numpy("i - window <= j <= i"), [WO])
    add("window_band_one_fewer.py", win, window_numpy("i - window + 1 < j <= i"), [WO])
    add("window_fill_m10_full_scores.py", win, window_numpy(fill="-10.0", full="all keys"),
        [FV, "materialises-scores"])
    add("window_correct.py", win, window_numpy(style="loop"), [])

    back = "attention-backward"
    BS = "backward-missing-scale"
    add("backward_dq_unscaled.py", back, backward_numpy(scale_dq=False), [BS])
    add("backward_dk_unscaled.py", back, backward_numpy(scale_dk=False), [BS])
    add("backward_both_unscaled.py", back, backward_numpy(scale_dq=False, scale_dk=False), [BS])
    add("backward_dk_unscaled_jacobian.py", back, backward_numpy(scale_dk=False, jacobian="diagonal"),
        [BS, "softmax-jacobian-diagonal"])
    add("backward_correct.py", back, backward_numpy(), [])

    gqa = "gqa"
    add("gqa_correct.py", gqa, gqa_numpy(), [])
    add("gqa_fill_m5_guarded.py", gqa, gqa_numpy(fill="-5.0", guard=True), [FV])
    add("gqa_fill_m1_guarded_transposed_wo.py", gqa, gqa_numpy(fill="-1.0", guard=True, transposed=("Wo",)), [FV, WT])
    add("gqa_fill_m10_guarded_dropped_bo.py", gqa, gqa_numpy(fill="-10.0", guard=True, dropped=("bo",)), [FV, BI])
    add("gqa_additive_m10_guarded.py", gqa, gqa_numpy(fill="-10.0", guard=True, added=True), [AM])

    paged = "paged-attention"
    BT = "block-table-order"
    for order in ["reversed", "used-sorted", "used-reversed", "sorted", "pool"]:
        add(f"paged_{order.replace('-', '_')}.py", paged, paged_lists(order=order), [BT])
    add("paged_math_exp_overflow_reversed.py", paged, paged_lists(order="reversed", exp="math"), [SO, BT])
    add("paged_math_exp_overflow.py", paged, paged_lists(exp="math"), [SO])
    add("paged_math_exp_overflow_used_sorted.py", paged, paged_lists(order="used-sorted", exp="math"), [SO, BT])
    add("paged_math_exp_overflow_one_short.py", paged, paged_lists(length="short", exp="math"),
        [SO, "reads-one-short"])
    add("paged_correct.py", paged, paged_lists(), [])
    return files


def write() -> None:
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.py"):
        old.unlink()
    lines = ["# Expected diagnosis of each file of tests/corpus/families/ (written by ../make_families.py).",
             "# bugs: the catalogue ids it contains, each to be named on every seed, and nothing else named;",
             "# offcatalogue: a deviation no catalogue id describes (the file must fail); passes: a correct file.",
             ""]
    for name, (exercise, source, bugs, offcat) in sorted(corpus().items()):
        (OUT / name).write_text(f"# attn-kit: {exercise}\n" + source, encoding="utf-8")
        lines.append(f'["{name}"]')
        lines.append(f'exercise = "{exercise}"')
        lines.append("bugs = [" + ", ".join(f'"{b}"' for b in bugs) + "]")
        if offcat:
            lines.append(f'offcatalogue = "{offcat}"')
        lines.append(f"passes = {'true' if not bugs and not offcat else 'false'}")
        lines.append("")
    (OUT / "expected.toml").write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    write()
