# attn-kit: mha-screen
"""Correct, but hangs in multi_head_attention after writing its pids to $ATTN_PID_FILE (as it sees them)."""
import math


def stable_softmax(scores, allowed=None):
    allowed = [True] * len(scores) if allowed is None else list(allowed)
    live = [s for s, a in zip(scores, allowed) if a]
    if not live:
        return [0.0 for _ in scores]
    top = max(live)
    ex = [math.exp(s - top) if a else 0.0 for s, a in zip(scores, allowed)]
    z = sum(ex)
    return [e / z for e in ex]


def causal_mask(B, T):
    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]


def padding_mask(lengths, T):
    return [[[j < n for j in range(T)] for _ in range(T)] for n in lengths]


def _lin(rows, W, b):
    out = [[sum(r[k] * W[k][c] for k in range(len(r))) for c in range(len(W[0]))] for r in rows]
    if b is not None:
        out = [[v + b[c] for c, v in enumerate(row)] for row in out]
    return out


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    import os, time
    with open(os.environ['ATTN_PID_FILE'], 'w') as fh:
        me = os.readlink('/proc/self')          # pids as /proc shows them (outside any PID namespace)
        parent = open(f'/proc/{me}/stat').read().rsplit(')', 1)[1].split()[1]
        fh.write(f'{me} {parent}')
    time.sleep(600)
    B, T, D = len(x), len(x[0]), len(x[0][0])
    if num_heads < 1 or D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    hd = D // num_heads
    outs, weights = [], []
    for b in range(B):
        q = _lin(x[b], params["Wq"], params.get("bq"))
        k = _lin(x[b], params["Wk"], params.get("bk"))
        v = _lin(x[b], params["Wv"], params.get("bv"))
        cat = [[0.0] * D for _ in range(T)]
        wb = []
        for h in range(num_heads):
            lo = h * hd
            wh = []
            for i in range(T):
                s = [sum(q[i][lo + c] * k[j][lo + c] for c in range(hd)) / math.sqrt(hd) for j in range(T)]
                w = stable_softmax(s, None if mask is None else mask[b][i])
                wh.append(w)
                for c in range(hd):
                    cat[i][lo + c] = sum(w[j] * v[j][lo + c] for j in range(T))
            wb.append(wh)
        outs.append(_lin(cat, params["Wo"], params.get("bo")))
        weights.append(wb)
    return (outs, weights) if return_weights else outs
