"""Writes the traced-locate corpus: each base in bases/ (a correct solution whose work is done in
methods, an nn.Module's forward, a class's __call__ and closures) with one or three mistakes put
in, and expected.toml recording, beside each file, the lines that are wrong.

Run from the repository root: python tests/corpus/locate_traced/generate.py. Each mistake is
(old text, new text, label): the old text occurs exactly once in the base, on one line, and the
new text stays on that line, so the line is the wrong one.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
BASES = HERE / "bases"

MISTAKES = {
    "torch_module": [
        ("att = att / hd**0.5", "att = att / D**0.5", "scale-by-model-width"),
        ("att = att / hd**0.5", "att = att", "no-scaling"),
        ("s.masked_fill(~ok,", "s.masked_fill(ok,", "mask-inverted"),
        ('k = self.project(x, "k")', 'k = self.project(x, "q")', "keys-from-wq"),
        ("ctx = (w @ v).transpose(1, 2).reshape(B, T, D)", "ctx = (w @ v).reshape(B, T, D)", "reshape-without-transpose"),
        ("return y if bias is None else y + bias", "return y", "biases-ignored"),
        ("total = e.sum(dim=-1, keepdim=True)", "total = e.sum(dim=-2, keepdim=True)", "softmax-wrong-axis"),
        ("w = stable_softmax(att, allowed)", "w = stable_softmax(att.transpose(-2, -1), allowed)", "scores-transposed"),
        ('return self.project(ctx, "o"), w', "return ctx, w", "no-output-projection"),
        ('y = x @ self.w["W" + name]', 'y = x @ self.w["W" + name].T', "weights-transposed"),
    ],
    "numpy_call": [
        ("scores = scores / np.sqrt(hd)", "scores = scores / np.sqrt(D)", "scale-by-model-width"),
        ("scores = scores / np.sqrt(hd)", "scores = scores", "no-scaling"),
        ("else np.asarray(allowed, dtype=bool)", "else ~np.asarray(allowed, dtype=bool)", "mask-inverted"),
        ("return a.reshape(B, T, H, hd).transpose(0, 2, 1, 3)", "return a.reshape(B, H, T, hd)", "split-without-transpose"),
        ("merged = heads.transpose(0, 2, 1, 3).reshape(B, T, D)", "merged = heads.reshape(B, T, D)", "reshape-without-transpose"),
        ('out = out + self.p["b" + name]', 'out = out - self.p["b" + name]', "bias-subtracted"),
        ("return weights @ v, weights", "return weights @ q, weights", "values-of-the-query"),
        ("np.exp(filled - top)", "np.exp(filled)", "softmax-overflow"),
        ("j <= i", "j < i", "causal-off-by-one"),
    ],
    "numpy_method_loop": [
        ("scaled = scores / math.sqrt(q.shape[-1])", "scaled = scores / math.sqrt(q.shape[-1] * self.num_heads)", "scale-by-model-width"),
        ("scaled = scores / math.sqrt(q.shape[-1])", "scaled = scores", "no-scaling"),
        ('k = x @ self.weight("Wk") + self.bias("bk", D)', 'k = x @ self.weight("Wk").T + self.bias("bk", D)', "weights-transposed"),
        ("cols = slice(h * hd, (h + 1) * hd)", "cols = slice(h, D, self.num_heads)", "heads-interleaved"),
        ("merged = np.concatenate(outs, axis=-1)", "merged = np.concatenate(outs, axis=1)", "heads-concatenated-over-time"),
        ('out = merged @ self.weight("Wo") + self.bias("bo", D)', 'out = merged + self.bias("bo", D)', "no-output-projection"),
        ("return np.zeros(width) if b is None else np.asarray(b, dtype=np.float64)", "return np.zeros(width)", "biases-ignored"),
        ("top = filled.max(axis=-1, keepdims=True)", "top = s.max(axis=-1, keepdims=True)", "max-over-blocked"),
        ("total = e.sum(axis=-1, keepdims=True)", "total = e.sum(axis=-2, keepdims=True)", "softmax-wrong-axis"),
    ],
    "numpy_kv_cache": [
        ("scaled = scores / np.sqrt(hd)", "scaled = scores / np.sqrt(D)", "scale-by-model-width"),
        ("scaled = scores / np.sqrt(hd)", "scaled = scores", "no-scaling"),
        ("return out if b is None else out + b", "return out", "biases-ignored"),
        ("return a.reshape(B, n, H, hd).transpose(0, 2, 1, 3)", "return a.reshape(B, H, n, hd)", "split-without-transpose"),
        ("weights = e / e.sum(axis=-1, keepdims=True)", "weights = e / e.sum(axis=-2, keepdims=True)", "softmax-wrong-axis"),
        ('return self.project(ctx, "o"), (keys, values)', "return ctx, (keys, values)", "no-output-projection"),
        ('q = self.project(x, "q").reshape(B, H, 1, hd)', 'q = self.project(x, "k").reshape(B, H, 1, hd)', "queries-from-wk"),
        ("scores = q @ k.transpose(0, 1, 3, 2)", "scores = q @ v.transpose(0, 1, 3, 2)", "values-as-keys"),
    ],
    "numpy_masked_bias": [
        ("scores = scores / math.sqrt(q.shape[-1])", "scores = scores", "no-scaling"),
        ("scores = scores / math.sqrt(q.shape[-1])", "scores = scores / math.sqrt(q.shape[-1] * H)", "scale-by-model-width"),
        ("scores = scores + np.asarray(bias", "scores = scores - np.asarray(bias", "bias-subtracted"),
        ("ok = self.allowed(masks, B, Q, K, causal, offset)", "ok = ~self.allowed(masks, B, Q, K, causal, offset)", "mask-inverted"),
        ("return y if b is None else y + np.asarray(b, dtype=np.float64)", "return y", "biases-ignored"),
        (
            "return y.reshape(B, y.shape[1], H, y.shape[2] // H).transpose(0, 2, 1, 3)",
            "return y.reshape(B, H, y.shape[1], y.shape[2] // H)",
            "split-without-transpose",
        ),
        (
            "merged = (weights @ v).transpose(0, 2, 1, 3).reshape(B, Q, -1)",
            "merged = (weights @ v).reshape(B, Q, -1)",
            "reshape-without-transpose",
        ),
        ('k = split(self.linear(context, "k"))', 'k = split(self.linear(context, "q"))', "keys-from-wq"),
    ],
    "numpy_tiled_class": [
        ('s = np.einsum("td,sd->ts", q, k[lo:hi]) * inv', 's = np.einsum("td,sd->ts", q, k[lo:hi])', "no-scaling"),
        ("inv = d**-0.5", "inv = d**-1.0", "double-scaling"),
        ("total = alpha * self.total + p.sum(axis=1)", "total = self.total + p.sum(axis=1)", "online-softmax-no-rescale"),
        ("acc = alpha[:, None] * self.acc + p @ values", "acc = self.acc + p @ values", "online-softmax-acc-not-rescaled"),
        (
            "alpha = np.exp(self.top - safe)",
            "alpha = np.exp(np.where(np.isfinite(self.top), safe - self.top, -np.inf))",
            "online-rescale-sign-flipped",
        ),
        ("self.top = np.full(rows, -np.inf)", "self.top = np.zeros(rows)", "running-max-init-zero"),
        ("s = np.where(allowed[:, lo:hi], s, -np.inf)", "s = np.where(~allowed[:, lo:hi], s, -np.inf)", "mask-inverted"),
        ("for lo in range(0, S, block_size):", "for lo in range(0, S - block_size + 1, block_size):", "partial-block-dropped"),
    ],
    "numpy_backward_closure": [
        ('z = np.einsum("bhtd,bhsd->bhts", q, k) * c', 'z = np.einsum("bhtd,bhsd->bhts", q, k)', "no-scaling"),
        ('g_q = np.einsum("bhts,bhsd->bhtd", g_z, k) * c', 'g_q = np.einsum("bhts,bhsd->bhtd", g_z, k)', "backward-missing-scale"),
        ('g_k = np.einsum("bhts,bhtd->bhsd", g_z, q) * c', 'g_k = np.einsum("bhst,bhtd->bhsd", g_z, q) * c', "dk-from-wrong-operand"),
        ('g_v = np.einsum("bhts,bhte->bhse", p, dout)', 'g_v = np.einsum("bhst,bhte->bhse", p, dout)', "dv-not-transposed"),
        ('delta = np.einsum("bhte,bhte->bht", dout, out)[..., None]', "delta = g_p.sum(axis=-1, keepdims=True)", "backward-rowsum-wrong"),
        ("g_z = p * (g_p - delta)", "g_z = p * (1 - p) * g_p", "softmax-jacobian-diagonal"),
        ("np.asarray(mask, dtype=bool)[:, None], z", "~np.asarray(mask, dtype=bool)[:, None], z", "mask-inverted"),
        ("n = e.sum(axis=-1, keepdims=True)", "n = e.sum(axis=-2, keepdims=True)", "softmax-wrong-axis"),
    ],
    "numpy_paged_reader": [
        ('keys, query) / np.sqrt(query.shape[-1])', "keys, query)", "no-scaling"),
        ('keys, query) / np.sqrt(query.shape[-1])', "keys, query) / query.shape[-1]", "double-scaling"),
        ("pool[int(table[t // size]), t % size]", "pool[int(table[t % size]), t // size]", "slot-index-swapped"),
        ("for t in range(n):", "for t in range(n - 1):", "reads-one-short"),
        ("for t in range(n):", "for t in range(-(-n // size) * size):", "reads-past-context"),
        ("read(q[b], block_tables[b], int(n))", "read(q[b], sorted(block_tables[b]), int(n))", "block-table-order"),
        ("scores = scores - scores.max(axis=-1, keepdims=True)", "scores = scores", "softmax-overflow"),
    ],
    "numpy_mla_heads": [
        ("logits = logits / np.sqrt(width)", "logits = logits", "no-scaling"),
        ("logits = logits / np.sqrt(width)", "logits = logits / np.sqrt(self.d_nope)", "mla-scale-wrong-width"),
        ('latent = x @ self.p["W_dkv"]', 'latent = _turn(x @ self.p["W_dkv"], position)', "rope-on-latent"),
        ("Step(params, num_heads)(x, position, cache)", "Step(params, num_heads)(x, 0, cache)", "mla-positions-ignored"),
        (
            'self.p["W_uk"][:, h * self.d_nope : (h + 1) * self.d_nope].T',
            'self.p["W_uk"].reshape(self.H, self.d_c, self.d_nope)[h].T',
            "absorbed-heads-misreshaped",
        ),
        ("np.exp(logits - logits.max(axis=-1, keepdims=True))", "np.exp(logits)", "softmax-overflow"),
        ('query = x @ self.p["W_q"]', 'query = x @ self.p["W_q"] / np.sqrt(self.d_nope + self.d_r)', "double-scaling"),
        (
            "Step(params, num_heads)(x, position, cache)",
            'Step(params, num_heads)(x, 0 if cache is None else np.shape(cache["c_kv"])[1], cache)',
            "mla-position-from-cache-length",
        ),
    ],
    "numpy_varlen_docs": [
        ("s = qh @ kh.T / np.sqrt(qh.shape[-1])", "s = qh @ kh.T", "no-scaling"),
        ("[None, :] <= self.past + np.arange", "[None, :] < self.past + np.arange", "causal-off-by-one"),
        ("<= self.past + np.arange(self.q.shape[0])[:, None]", "<= np.arange(self.q.shape[0])[:, None]", "causal-alignment-wrong"),
        ("g = h // self.group", "g = h % self.k.shape[1]", "kv-head-mapping-modulo"),
        ("[lo * c - hi * s, hi * c + lo * s]", "[lo * c + hi * s, hi * c - lo * s]", "rope-sign-flipped"),
        ("p = p / p.sum(axis=1, keepdims=True)", "p = p / p.sum(axis=0, keepdims=True)", "softmax-wrong-axis"),
        ("inv = 10000.0 ** (-np.arange(0, d, 2) / d)", "inv = 10000.0 ** (-np.arange(0, d // 2) / d)", "rope-frequency-exponent"),
    ],
}

# three mistakes in one file (indices into the base's list)
TRIPLES = {
    "torch_module": [(0, 2, 5), (3, 4, 6), (1, 7, 9)],
    "numpy_call": [(0, 2, 4), (1, 5, 7), (3, 6, 8)],
    "numpy_method_loop": [(0, 2, 8), (1, 3, 6), (4, 5, 7)],
    "numpy_kv_cache": [(0, 3, 5), (1, 4, 6), (2, 4, 7)],
    "numpy_masked_bias": [(0, 3, 6), (1, 2, 4), (2, 5, 7)],
    "numpy_tiled_class": [(0, 3, 6), (1, 4, 7)],
    "numpy_backward_closure": [(0, 3, 5), (1, 2, 7)],
    "numpy_paged_reader": [(0, 2, 5)],
    "numpy_mla_heads": [(0, 2, 4), (1, 5, 6)],
    "numpy_varlen_docs": [(0, 3, 5), (1, 4, 6)],
}


# files whose first traced divergence is on a wrong line (tests/test_locate_trace.py holds the
# kit to it); the others are recorded misses of the tracing (the edit search may still find them)
TRACED = {
    "numpy_call__mask-inverted.py",
    "numpy_call__reshape-without-transpose.py",
    "numpy_call__scale-by-model-width.py",
    "numpy_call__scale-by-model-width__mask-inverted__reshape-without-transpose.py",
    "numpy_call__softmax-overflow.py",
    "numpy_call__split-without-transpose.py",
    "numpy_call__split-without-transpose__values-of-the-query__causal-off-by-one.py",
    "numpy_call__values-of-the-query.py",
    "numpy_method_loop__no-output-projection.py",
    "numpy_method_loop__no-scaling.py",
    "numpy_method_loop__scale-by-model-width.py",
    "numpy_method_loop__scale-by-model-width__weights-transposed__softmax-wrong-axis.py",
    "numpy_method_loop__weights-transposed.py",
    "torch_module__mask-inverted.py",
    "torch_module__no-scaling__scores-transposed__weights-transposed.py",
    "torch_module__reshape-without-transpose.py",
    "torch_module__scale-by-model-width.py",
    "torch_module__scale-by-model-width__mask-inverted__biases-ignored.py",
    "torch_module__weights-transposed.py",
    "numpy_kv_cache__scale-by-model-width.py",
    "numpy_kv_cache__no-scaling.py",
    "numpy_kv_cache__biases-ignored.py",
    "numpy_kv_cache__split-without-transpose.py",
    "numpy_kv_cache__scale-by-model-width__split-without-transpose__no-output-projection.py",
    "numpy_kv_cache__biases-ignored__softmax-wrong-axis__values-as-keys.py",
    "numpy_masked_bias__scale-by-model-width.py",
    "numpy_masked_bias__bias-subtracted.py",
    "numpy_masked_bias__mask-inverted.py",
    "numpy_masked_bias__biases-ignored.py",
    "numpy_masked_bias__split-without-transpose.py",
    "numpy_masked_bias__reshape-without-transpose.py",
    "numpy_tiled_class__no-scaling.py",
    "numpy_tiled_class__online-softmax-no-rescale.py",
    "numpy_tiled_class__online-softmax-acc-not-rescaled.py",
    "numpy_tiled_class__online-rescale-sign-flipped.py",
    "numpy_tiled_class__mask-inverted.py",
    "numpy_tiled_class__no-scaling__online-softmax-acc-not-rescaled__mask-inverted.py",
    "numpy_backward_closure__no-scaling.py",
    "numpy_backward_closure__backward-missing-scale.py",
    "numpy_backward_closure__dk-from-wrong-operand.py",
    "numpy_backward_closure__mask-inverted.py",
    "numpy_backward_closure__no-scaling__dv-not-transposed__softmax-jacobian-diagonal.py",
    "numpy_paged_reader__no-scaling.py",
    "numpy_paged_reader__double-scaling.py",
    "numpy_paged_reader__slot-index-swapped.py",
    "numpy_mla_heads__mla-scale-wrong-width.py",
    "numpy_varlen_docs__no-scaling.py",
    "numpy_varlen_docs__rope-sign-flipped.py",
    "numpy_varlen_docs__no-scaling__kv-head-mapping-modulo__softmax-wrong-axis.py",
    # since the traced run records which call made a value and from which line (session 28)
    "torch_module__no-scaling.py",
    "torch_module__keys-from-wq.py",
    "torch_module__biases-ignored.py",
    "torch_module__no-output-projection.py",
    "torch_module__keys-from-wq__reshape-without-transpose__softmax-wrong-axis.py",
    "numpy_call__no-scaling.py",
    "numpy_call__bias-subtracted.py",
    "numpy_call__no-scaling__bias-subtracted__softmax-overflow.py",
    "numpy_method_loop__biases-ignored.py",
    "numpy_method_loop__no-scaling__heads-interleaved__biases-ignored.py",
    "numpy_kv_cache__queries-from-wk.py",
    "numpy_kv_cache__values-as-keys.py",
    "numpy_kv_cache__no-scaling__softmax-wrong-axis__queries-from-wk.py",
    "numpy_masked_bias__no-scaling.py",
    "numpy_masked_bias__keys-from-wq.py",
    "numpy_masked_bias__no-scaling__mask-inverted__reshape-without-transpose.py",
    "numpy_masked_bias__scale-by-model-width__bias-subtracted__biases-ignored.py",
    "numpy_masked_bias__bias-subtracted__split-without-transpose__keys-from-wq.py",
    "numpy_method_loop__heads-concatenated-over-time.py",  # the right numbers in a wrong shape
    "numpy_kv_cache__softmax-wrong-axis.py",  # all-ones weights of a decoding step
    "numpy_tiled_class__double-scaling.py",  # a scale factor wrong where it is computed
    "numpy_mla_heads__mla-positions-ignored.py",  # a position passed in wrong by the caller
}


def _apply(text: str, mistakes) -> tuple[str, list[int]]:
    lines = []
    for old, new, _ in mistakes:
        assert text.count(old) == 1, old
        before = text[: text.index(old)]
        lines.append(before.count("\n") + 1)
        text = text.replace(old, new)
    return text, sorted(lines)


def main() -> None:
    entries = []
    for base, mistakes in MISTAKES.items():
        source = (BASES / f"{base}.py").read_text()
        combos = [(m,) for m in mistakes] + [tuple(mistakes[i] for i in t) for t in TRIPLES[base]]
        for combo in combos:
            text, lines = _apply(source, combo)
            name = f"{base}__{'__'.join(m[2] for m in combo)}.py"
            exercise = source.split("\n", 1)[0].removeprefix("# attn-kit: ").strip()
            header = f"# attn-kit: {exercise}\n# traced-locate corpus: bases/{base}.py with {', '.join(m[2] for m in combo)}\n"
            body = text.split("\n", 1)[1]
            (HERE / name).write_text(header + body)
            entries.append((name, exercise, [n + 1 for n in lines], [m[2] for m in combo]))
    out = ["# The traced-locate corpus (written by generate.py): per file, the wrong lines and the mistakes.", ""]
    for name, exercise, lines, labels in entries:
        out += [f'["{name}"]', f'exercise = "{exercise}"', f"lines = {lines}", f"mistakes = {labels!r}".replace("'", '"')]
        out += [f"traced = {'true' if name in TRACED else 'false'}", ""]
    (HERE / "expected.toml").write_text("\n".join(out))


if __name__ == "__main__":
    main()
