"""Writes the locate corpus: each base in bases/ (a correct solution) with one, two or three
mistakes put in, and corpus.toml recording, beside each file, the lines that are wrong.

Run from the repository root: python tests/corpus/locate/generate.py. The mistakes are listed
here as (base, old text, new text, label, catalogue?): the old text must occur exactly once in
the base, on one line, and the new text stays on that line, so the line is the wrong one.
"""

from __future__ import annotations

import itertools
from pathlib import Path

HERE = Path(__file__).parent
BASES = HERE / "bases"

# label: a catalogue bug id when the mistake is one; otherwise a short name (catalogue=False)
MISTAKES = {
    "numpy_heads_loop": [
        ("/ np.sqrt(hd)", "", "no-scaling", True),
        ("np.sqrt(hd)", "np.sqrt(D)", "scale-by-model-width", True),
        ("else np.asarray(allowed, dtype=bool)", "else ~np.asarray(allowed, dtype=bool)", "mask-inverted", True),
        ("cols <= rows", "cols < rows", "causal-off-by-one", True),
        ("keys = np.arange(T)[None, None, :]", "keys = np.arange(T)[None, :, None]", "padding-masks-queries", True),
        ("total = e.sum(axis=-1, keepdims=True)", "total = e.sum(axis=-2, keepdims=True)", "softmax-wrong-axis", True),
        ("k = x @ Wk + bk", "k = x @ Wk.T + bk", "weights-transposed", True),
        ("q = x @ Wq + bq", "q = x @ Wq", "biases-ignored", True),
        ("np.exp(filled - top)", "np.exp(filled)", "softmax-overflow", True),
        ("top = filled.max(axis=-1", "top = s.max(axis=-1", "max-over-blocked", True),
        ("cols = slice(h * hd, (h + 1) * hd)", "cols = slice(h, D, num_heads)", "heads-interleaved", True),
        ("np.concatenate(heads, axis=-1)", "np.concatenate(heads, axis=1)", "heads-concatenated-over-time", False),
        ("np.stack(weights, axis=1)", "np.stack(weights, axis=0)", "weights-stacked-on-batch", False),
        ("np.swapaxes(k[:, :, cols], -1, -2)", "np.swapaxes(k[:, :, cols], 0, 1)", "keys-swapped-wrong-axes", False),
        ("out = concat @ Wo + bo", "out = concat @ Wo.T + bo", "output-weights-transposed", False),
    ],
    "torch_batched": [
        (" / hd ** 0.5", "", "no-scaling", True),
        ("hd ** 0.5", "D ** 0.5", "scale-by-model-width", True),
        ("s.masked_fill(~ok,", "s.masked_fill(ok,", "mask-inverted", True),
        ("torch.tril(torch.ones(T, T, dtype=torch.bool))", "torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)",
         "causal-off-by-one", True),
        ("torch.arange(T).view(1, 1, T)", "torch.arange(T).view(1, T, 1)", "padding-masks-queries", True),
        ("total = e.sum(dim=-1, keepdim=True)", "total = e.sum(dim=-2, keepdim=True)", "softmax-wrong-axis", True),
        ("y = x @ torch.as_tensor(params[w], dtype=torch.float64)",
         "y = x @ torch.as_tensor(params[w], dtype=torch.float64).T", "weights-transposed", True),
        ("concat = heads.transpose(1, 2).reshape(B, T, D)", "concat = heads.reshape(B, T, D)",
         "reshape-without-transpose", True),
        ("k.transpose(-2, -1)", "k.transpose(1, 2)", "keys-transposed-over-heads", False),
        ("torch.exp(filled - top)", "torch.exp(filled)", "softmax-overflow", True),
        ("top = filled.amax(dim=-1", "top = s.amax(dim=-1", "max-over-blocked", True),
        ("y = y + torch.as_tensor(params[b]", "y = y - torch.as_tensor(params[b]", "bias-subtracted", False),
        ("out = _linear(concat, params, \"Wo\", \"bo\")", "out = concat", "no-output-projection", True),
    ],
    "lists_compact": [
        (" / math.sqrt(hd)", "", "no-scaling", True),
        ("math.sqrt(hd)", "math.sqrt(D)", "scale-by-model-width", True),
        ("[bool(a) for a in _rows(allowed)]", "[not a for a in _rows(allowed)]", "mask-inverted", True),
        ("[[[j <= i for j", "[[[j < i for j", "causal-off-by-one", True),
        ("math.exp(s - m)", "math.exp(s)", "softmax-overflow", True),
        ("m = max(kept)", "m = max(scores)", "max-over-blocked", True),
        ("[[[j <= i for j", "[[[j >= i for j", "causal-mask-reversed", False),
        ("for c in range(lo, hi)) / math", "for c in range(lo, hi - 1)) / math", "head-columns-short", False),
        ("return [t / z for t in e]", "return [t / (z + 1) for t in e]", "normaliser-plus-one", False),
        ("P.get(\"bq\")) for t in x[b]]", "None) for t in x[b]]", "biases-ignored", True),
        ("ctx[i][c] = sum(w[j] * v[j][c] for j in range(T))", "ctx[i][c] = sum(w[j] * v[i][c] for j in range(T))",
         "values-of-the-query", False),
    ],
    "lists_loops": [
        ("s > best", "s < best", "max-is-a-min", False),
        ("rows.append([j <= i for j in range(T)])", "rows.append([j <= i + 1 for j in range(T)])",
         "causal-off-by-one", True),
        ("out.append([[j < n for j in range(T)] for i in range(T)])",
         "out.append([[i < n for j in range(T)] for i in range(T)])", "padding-masks-queries", True),
        ("y[j] += r[i] * W[i][j]", "y[j] += r[i] * W[j][i]", "weights-transposed", True),
        ("/ math.sqrt(hd)", "/ math.sqrt(D)", "scale-by-model-width", True),
        (" / math.sqrt(hd)", "", "no-scaling", True),
        ("math.exp(s - best) if ok", "math.exp(s) if ok", "softmax-overflow", True),
        ("[bool(v) for v in mask[b][i]]", "[not v for v in mask[b][i]]", "mask-inverted", True),
        ("out.append(linear(merged, params[\"Wo\"], params.get(\"bo\")))", "out.append(merged)",
         "no-output-projection", True),
        ("return [e / z for e in exps]", "return [e / n for e in exps]", "divides-by-length", False),
    ],
    "einsum": [
        ("np.einsum(\"bihc,bjhc->bhij\", q, k) / np.sqrt(hd)", "np.einsum(\"bihc,bjhc->bhij\", q, k)", "no-scaling", True),
        ("/ np.sqrt(hd)", "/ np.sqrt(D)", "scale-by-model-width", True),
        ("else np.asarray(mask, dtype=bool)", "else ~np.asarray(mask, dtype=bool)", "mask-inverted", True),
        ("(j <= i)[None]", "(j < i)[None]", "causal-off-by-one", True),
        ("z = e.sum(axis=-1, keepdims=True)", "z = e.sum(axis=-2, keepdims=True)", "softmax-wrong-axis", True),
        ("\"bhij,bjhc->bihc\"", "\"bhij,bjhc->bhic\"", "reshape-without-transpose", True),
        ("\"btd,de->bte\"", "\"btd,ed->bte\"", "weights-transposed", True),
        ("np.where(allowed, scores, -np.inf).max(", "scores.max(", "max-over-blocked", True),
        ("np.arange(T).reshape(1, 1, T) < L", "np.arange(T).reshape(1, T, 1) < L", "padding-masks-queries", True),
        ("out = heads @ np.asarray(params[\"Wo\"], dtype=float)", "out = heads", "no-output-projection", True),
        ("np.where(live, np.where(allowed", "np.where(~live, np.where(allowed", "live-rows-inverted", False),
        ("e = np.where(allowed, np.exp(", "e = np.where(allowed.T, np.exp(", "mask-transposed", False),
    ],
    "numpy_reference": [
        ("scale = 1.0 / np.sqrt(hd)", "scale = 1.0 / np.sqrt(D)", "scale-by-model-width", True),
        ("np.copyto(s, -np.inf, where=~np.broadcast_to", "np.copyto(s, -1e4, where=~np.broadcast_to",
         "fill-value-too-weak", True),
        ("total[total == 0.0] = 1.0", "total[total != 0.0] = 1.0", "normaliser-replaced", False),
        ("scores = q @ k.transpose(0, 1, 3, 2)", "scores = q @ k.transpose(0, 2, 1, 3)", "keys-permuted-wrong", False),
        ("heads = weights @ v", "heads = v @ weights", "values-times-weights", False),
        ("keys = np.arange(T).reshape(1, 1, T)", "keys = np.arange(T).reshape(1, T, 1)", "padding-masks-queries", True),
        ("return np.broadcast_to(np.tril(np.ones((T, T), dtype=bool))",
         "return np.broadcast_to(np.tril(np.ones((T, T), dtype=bool), k=1)", "causal-off-by-one", True),
    ],
}

# two and three mistakes in one file: indexes into MISTAKES[base]
COMBINATIONS = {
    "numpy_heads_loop": [(0, 2), (3, 7), (1, 9), (6, 8), (4, 11), (0, 3, 7), (2, 5, 8)],
    "torch_batched": [(0, 2), (3, 7), (1, 10), (5, 9), (0, 3, 6), (2, 7, 9)],
    "lists_compact": [(0, 2), (3, 5), (1, 4), (0, 3, 5)],
    "lists_loops": [(1, 5), (3, 7), (4, 6), (1, 3, 5)],
    "einsum": [(0, 2), (3, 6), (1, 4), (7, 8), (0, 3, 6)],
}


def inject(text: str, mistakes) -> tuple[str, list[int]]:
    lines = []
    for old, new, _, _ in mistakes:
        assert text.count(old) == 1, old
        at = text.index(old)
        lines.append(text[:at].count("\n") + 1)
        text = text.replace(old, new)
    return text, sorted(lines)


def main() -> None:
    entries = []
    for base, mistakes in MISTAKES.items():
        original = (BASES / f"{base}.py").read_text()
        chosen = [(i,) for i in range(len(mistakes))] + [tuple(c) for c in COMBINATIONS.get(base, [])]
        for combo in chosen:
            picked = [mistakes[i] for i in combo]
            first, rest = original.split("\n", 1)
            text = f"{first}\n# locate corpus: bases/{base}.py with {', '.join(m[2] for m in picked)}\n{rest}"
            buggy, lines = inject(text, picked)
            name = f"{base}__{'__'.join(m[2] for m in picked)}.py"
            (HERE / name).write_text(buggy)
            entries.append((name, lines, [m[2] for m in picked], [m[3] for m in picked]))
    out = ["# The locate corpus (written by generate.py): per file, the wrong lines and the mistakes in it.", ""]
    for name, lines, labels, catalogue in entries:
        out += [f'["{name}"]', 'exercise = "mha-screen"', f"lines = {lines}", f"mistakes = {labels!r}".replace("'", '"'),
                f"catalogue = {str(catalogue).lower()}", ""]
    (HERE / "corpus.toml").write_text("\n".join(out))
    print(len(entries), "files")


if __name__ == "__main__":
    main()
