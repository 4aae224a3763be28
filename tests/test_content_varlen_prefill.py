"""varlen-prefill's content recomputed: every figure of its statement (the worked example, the
memory bound), of its hints and questions; the statement's example against the suite's own
inputs; the two references against the suite's naive per-document rows and against the
properties the suite grades; and the hint ladder's code rungs, assembled as written, against the
reference."""

from __future__ import annotations

import ast
import re
import textwrap

import numpy as np
import pytest

from attn_kit.base.harness import measure
from attn_kit.base.paths import bug_files, solutions_dir
from attn_kit.checks import varlen_prefill as suite
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog

EXERCISE = catalog.exercise("varlen-prefill")
TEXT = EXERCISE.statement
FOLDER = solutions_dir("varlen-prefill")
REFERENCES = {name: load_module(str(FOLDER / name)) for name in ("reference_numpy.py", "reference_padded.py")}
REFERENCE = REFERENCES["reference_numpy.py"]


def near(got, want, places=6):
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), atol=0.6 * 10**-places, rtol=0)


def question(question_id: str) -> catalog.Question:
    return next(q for q in EXERCISE.questions if q.id == question_id)


def hint(title: str, step: str) -> catalog.Hint:
    return next(h for h in EXERCISE.hints if h.title == title and h.step == step)


def code_of(h) -> str:
    return h.text.split("```\n", 1)[1].split("```", 1)[0]


def random_pack(rng, big=False) -> suite.Pack:
    docs = int(rng.integers(1, 6))
    H_kv = int(rng.integers(1, 4))
    return suite.pack(
        rng,
        rng.integers(0, 6, size=docs),
        rng.integers(0, 5, size=docs) * (rng.random(docs) < 0.6),
        H=H_kv * int(rng.integers(1, 4)),
        H_kv=H_kv,
        d=2 * int(rng.integers(1, 5)),
        dv=int(rng.integers(1, 5)),
        scale=30.0 if big else 1.0,
    )


# --- the worked example ------------------------------------------------------------------------


def block_value(name: str):
    """`name = [...]` from the statement's example block, where q, k and v sit side by side in
    columns: each line is cut where the first line's "k =" and "v =" start."""
    block = TEXT.split("## Worked example", 1)[1].split("| row |", 1)[0]
    lines = [line for line in block.splitlines() if "[" in line and "cu_seqlens" not in line]
    k_at, v_at = lines[0].index("k ="), lines[0].index("v =")
    cut = {"q": slice(0, k_at), "k": slice(k_at, v_at), "v": slice(v_at, None)}[name]
    text = "".join(line[cut] for line in lines).replace(f"{name} =", "")
    return np.array(ast.literal_eval(text.strip()), dtype=float)


def test_worked_example_inputs_are_the_public_checks():
    near(block_value("q"), suite.PUBLIC_Q, 12)
    near(block_value("k"), suite.PUBLIC_K, 12)
    near(block_value("v"), suite.PUBLIC_V, 12)
    assert f"cu_seqlens_q = {suite.PUBLIC_CU_Q}" in TEXT and f"cu_seqlens_k = {suite.PUBLIC_CU_K}" in TEXT


def test_worked_example_table_is_the_naive_rows():
    p = suite.public_pack()
    expected = p.expected()
    table = re.findall(r"^\| (\d) \| (\d), (\d) \| `(\[.*?\])` \| `(\[.*?\])` \|$", TEXT, re.MULTILINE)
    assert len(table) == 4
    for row, doc, pos, head0, head1 in table:
        r = int(row)
        near(expected[r, 0], ast.literal_eval(head0))
        near(expected[r, 1], ast.literal_eval(head1))
        i = 0 if r < 2 else 1
        n_q, n_k = p.rows(i).stop - p.rows(i).start, p.keys(i).stop - p.keys(i).start
        assert int(doc) == i and int(pos) == n_k - n_q + (r - p.rows(i).start)
    for module in REFERENCES.values():
        near(module.varlen_prefill(*p.args()), expected, 12)


def test_worked_example_hand_figures():
    a = 1.0  # row 1 sits at position 1: the pair turns by 1 radian (θ_0 = 1 with d = 2)
    q = [np.cos(a), np.sin(a)]
    near(q, [0.540302, 0.841471])
    k1 = [-np.sin(a), np.cos(a)]
    near(k1, [-0.841471, 0.540302])
    scores = np.array([q[0] * 1 + q[1] * 0, q[0] * k1[0] + q[1] * k1[1]]) / np.sqrt(2)
    near(scores, [0.382051, 0])
    w = np.exp(scores) / np.exp(scores).sum()
    near(w, [0.594368, 0.405632])
    expected = suite.public_pack().expected()
    near(expected[2, 0], 2 * expected[1, 0], 12)  # the same geometry with values doubled
    near(expected[2, 1], [1, 1], 12)  # q = 0: the mean of [2, 0] and [0, 2]


# --- the memory bound ---------------------------------------------------------------------------


def test_memory_bound_figures_match_the_check():
    m = suite.MEMORY
    total = m["docs"] * m["length"]
    assert total == 8192 and "512 one-shot documents of 16 tokens (total_q = total_k = 8,192" in TEXT
    bound = suite.memory_bound(total, m["H"], m["length"], m["dv"])
    assert bound == 64 * 8192 * 2 * (16 + 4) == 20 * 2**20
    assert "**64·total_q·H·(max n_k + dv)\nbytes = 20 MiB**" in TEXT
    assert total * total == 64 * 2**20 and 8 * total * total == 512 * 2**20
    assert "64 MiB even as bools\n(512 MiB as float64 scores)" in TEXT
    concept = " ".join(hint("Memory of the whole pack", "concept").text.split())
    assert m["docs"] * m["length"] ** 2 * 512 == total * total  # 1/512 of the entries are useful
    assert "512·16·16, 1/512 of them" in concept
    assert m["H"] * m["length"] ** 2 * 8 == 4 * 2**10 and "(4 KiB here)" in concept


@pytest.fixture(scope="module")
def memory_pack():
    m = suite.MEMORY
    p = suite.pack(np.random.default_rng(0), [m["length"]] * m["docs"], H=m["H"], H_kv=m["H_kv"], d=m["d"], dv=m["dv"])
    return p, suite.memory_bound(len(p.q), m["H"], m["length"], m["dv"])


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_references_stay_within_the_memory_bound(memory_pack, name):
    p, bound = memory_pack
    _, extra = measure(REFERENCES[name].varlen_prefill, *p.args())
    assert extra["peak_bytes"] < bound / 2, (name, extra["peak_bytes"])


def test_the_pack_mask_breaks_the_memory_bound(memory_pack):
    p, bound = memory_pack
    bug = load_module(str(FOLDER / "bugs" / "materialises-scores.py"))
    _, extra = measure(bug.varlen_prefill, *p.args())
    assert extra["peak_bytes"] > bound
    assert suite.replay_peak_over_bound(bug, *p.args()) == [1.0]
    assert suite.replay_peak_over_bound(REFERENCE, *p.args()) == [0.0]


# --- the references and the graded properties ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_references_equal_the_naive_rows(name):
    rng = np.random.default_rng(37)
    for n in range(30):
        p = random_pack(rng, big=n % 5 == 4)
        got = REFERENCES[name].varlen_prefill(*p.args())
        assert got.shape == (len(p.q), p.q.shape[1], p.v.shape[2])
        np.testing.assert_allclose(got, p.expected(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_references_keep_other_documents_bit_identical_and_chunks_equal_one_shot(name):
    fn = REFERENCES[name].varlen_prefill
    rng = np.random.default_rng(5)
    p = suite.pack(rng, [3, 4, 2], cached=[0, 2, 1], H=4, H_kv=2, d=4)
    before = fn(*p.args())
    p.k[p.keys(1).start + 1] += 7.0
    p.v[p.keys(1).start + 1] -= 3.0
    after = fn(*p.args())
    for i in (0, 2):
        assert np.array_equal(before[p.rows(i)], after[p.rows(i)])
    assert not np.array_equal(before[p.rows(1)], after[p.rows(1)])
    full = suite.pack(rng, [6], H=2, H_kv=1, d=4)
    whole = fn(*full.args())
    first = fn(full.q[:2], full.k[:2], full.v[:2], [0, 2], [0, 2])
    rest = fn(full.q[2:], full.k, full.v, [0, 4], [0, 6])
    np.testing.assert_allclose(np.concatenate([first, rest]), whole, rtol=1e-12, atol=1e-14)


def test_empty_pack_gives_an_empty_output():
    p = suite.pack(np.random.default_rng(1), [0, 0], cached=[0, 3], H=2, H_kv=1, d=4, dv=3)
    for module in REFERENCES.values():
        assert module.varlen_prefill(*p.args()).shape == (0, 2, 3)


# --- the hint ladder's code, assembled ----------------------------------------------------------


def test_code_rungs_assembled_match_the_reference():
    """The loop rung with the cache, groups and softmax rungs in place of its `...` (the softmax
    rung's own `...` filled with the blocking rung), rope from the positions rung, as written."""
    rung = {h.title: code_of(h) for h in EXERCISE.hints if h.step == "code"}
    softmax = re.sub(
        r"^\.\.\..*$", rung["The causal bound and blocked keys"].rstrip("\n"), rung["One softmax per query and head"], flags=re.M
    )
    body = rung["A chunk that follows a cache"] + rung["Query heads in groups"] + softmax
    loop = re.sub(
        r"^(\s*)\.\.\..*$", lambda m: textwrap.indent(body.rstrip("\n"), m.group(1)), rung["Where a document starts and ends"], flags=re.M
    )
    source = rung["Positions inside each document"] + "\n\ndef varlen(q, k, v, cu_seqlens_q, cu_seqlens_k):\n"
    source += "    H, d, dv = q.shape[1], q.shape[2], v.shape[2]\n" + textwrap.indent(loop, "    ") + "    return out\n"
    namespace: dict = {"np": np}
    exec(source, namespace)
    rng = np.random.default_rng(11)
    for _ in range(15):
        p = random_pack(rng)
        np.testing.assert_allclose(namespace["varlen"](*p.args()), REFERENCE.varlen_prefill(*p.args()), rtol=1e-9, atol=1e-12)
    assert "doc[:, None] == doc[None, :]" in rung["Memory of the whole pack"]


# --- the questions ----------------------------------------------------------------------------------


def test_varlen_packing_question():
    text = " ".join(question("varlen-packing-saves").answer.split())
    lengths = [512, 100, 30, 2000]
    slots, real = len(lengths) * max(lengths), sum(lengths)
    assert (slots, real) == (8000, 2642) and "4·2,000 = 8,000 token slots" in text and "2,642 real tokens" in text
    assert round(100 * (1 - real / slots)) == 67 and "67%" in text
    squares, padded = sum(n * n for n in lengths), len(lengths) * max(lengths) ** 2
    assert (squares, padded) == (4_273_044, 16_000_000) and "4,273,044" in text and "16,000,000" in text
    assert round(padded / squares, 1) == 3.7 and "3.7 times less" in text


def test_varlen_chunked_prefill_question():
    text = " ".join(question("varlen-chunked-prefill").answer.split())
    N, C = 8192, 2048
    reads = [min(N, C * (i + 1)) for i in range(N // C)]
    assert reads == [2048, 4096, 6144, 8192] and sum(reads) == 20_480
    assert "2,048 + 4,096 + 6,144 + 8,192 = 20,480 keys" in text and sum(reads) / N == 2.5 and "2.5 times" in text


def test_varlen_positions_question():
    """The claim itself: pack-wide positions pass a one-shot pack (within rounding) and fail as soon
    as a document has a cache."""
    bug = load_module(str(FOLDER / "bugs" / "varlen-positions-not-restarted.py"))
    rng = np.random.default_rng(3)
    one_shot = suite.pack(rng, [3, 5, 4], H=2, H_kv=1, d=4)
    np.testing.assert_allclose(bug.varlen_prefill(*one_shot.args()), one_shot.expected(), rtol=1e-9, atol=1e-9)
    cached = suite.pack(rng, [3, 5, 4], cached=[2, 0, 1], H=2, H_kv=1, d=4)
    assert not np.allclose(bug.varlen_prefill(*cached.args()), cached.expected(), atol=1e-3)
    assert "passes" in question("varlen-positions-restart").answer


def test_varlen_memory_question():
    text = " ".join(question("varlen-block-diagonal-memory").answer.split())
    docs, n, H = 256, 32, 2
    total = docs * n
    assert total == 8192 and total**2 == 67_108_864 and "67,108,864 entries" in text
    assert total**2 == 64 * 2**20 and 8 * total**2 == 512 * 2**20 and "64 MiB as bools" in text and "512 MiB per head" in text
    assert docs * n * n == 262_144 and total**2 // (docs * n * n) == 256 and "262,144 entries, 1/256" in text
    assert H * n * n * 8 == 16 * 2**10 and "16 KiB at H = 2" in text


def test_varlen_gqa_cache_question():
    text = " ".join(question("varlen-gqa-cache").answer.split())
    H, H_kv, width, layers = 32, 8, 128, 32
    assert 13 // (H // H_kv) == 3 and 13 % H_kv == 5 and "head 13 reads K/V head 3 (not 13 % 8 = 5)" in text
    per_layer = 2 * H_kv * width
    assert per_layer == 2048 and per_layer * layers == 65_536 and per_layer * layers * 2 == 131_072 == 128 * 2**10
    assert "131,072 bytes or 128 KiB" in text and 2 * H * width * layers * 2 == 512 * 2**10 and "(512 KiB)" in text


def test_every_bug_file_is_the_reference_with_marked_changes():
    """Each bug file differs from the reference only on lines marked BUG(its id) or next to them."""
    reference = (FOLDER / "reference_numpy.py").read_text().split("import numpy as np\n", 1)[1].splitlines()
    files = bug_files("varlen-prefill")
    assert len(files) == 22
    for path in files:
        body = path.read_text().split("import numpy as np\n", 1)[1].splitlines()
        extra = [line for line in body if line not in reference]
        assert extra and any(f"BUG({path.stem})" in line for line in extra), path.name
