"""Bug families: each id is named in every form SPEC gives it, on code the kit did not write.

tests/corpus/families/ (written by tests/corpus/make_families.py from SPEC and the statements
only) holds variants: subsets of weights or biases, other fill values with and without a guard
for empty rows, either side of an off-by-one, a mistake in one function only, float32 solutions,
an exception or NaN bug beside a plain one, and deviations no catalogue id describes, alone or
beside a catalogue bug acting in other checks. Expected outcomes are in expected.toml:
every listed id is named, nothing else is (a name outside the list is a false accusation), and
the correct files pass.

The default run grades FAST (a few files, seed 1); `-m slow` grades every file on seed 1, split
between this module and test_diagnosis_families_more.py so that xdist's loadfile gives each core
half of the corpus.
"""

from __future__ import annotations

import importlib.util
import tomllib
import zlib

import pytest

from attn_kit.diagnosis import compose
from attn_kit.load import catalog

from conftest import need_extra, need_torch
from helpers import CORPUS, graded

FAMILIES = CORPUS / "families"
SEED = 1
FAST = {
    "np_transposed_wq_wo.py",
    "np_dropped_bk_bv.py",
    "np_fill_m10p0_guarded.py",
    "np_causal_plus1_tril.py",
    "np_nan_rows_transposed_wo.py",
    "lists_overflow_dropped_bo.py",
    "np_residual_fill_m10.py",
    "np_residual.py",
    "np32_transposed_wo.py",
    "paged_used_sorted.py",
    "backward_dk_unscaled.py",
    "np_correct.py",
    "np_fill_m7_guarded.py",
    "gqa_fill_m1_guarded_transposed_wo.py",
    "paged_math_exp_overflow_reversed.py",
}


def expected() -> dict:
    return tomllib.loads((FAMILIES / "expected.toml").read_text(encoding="utf-8"))


def half(name: str) -> int:
    """Which of the two modules grades this file (a stable split of the corpus)."""
    return zlib.crc32(name.encode()) % 2


def cases(part: int) -> list:
    return [
        pytest.param(name, marks=[] if name in FAST else [pytest.mark.slow], id=name) for name in sorted(expected()) if half(name) == part
    ]


def check_file(name: str) -> None:
    data = expected()[name]
    report = graded(FAMILIES / name, SEED, data["exercise"])
    named = sorted(d.bug for d in report.diagnosis)
    if data["passes"]:
        assert report.passed and named == [], f"{name}: passed={report.passed}, named {named}"
        return
    assert not report.passed, f"{name} passed every check"
    wanted = sorted(data["bugs"])
    assert set(named) <= set(wanted), f"{name}: false accusation, named {named}, contains {wanted}"
    assert named == wanted, f"{name}: named {named}, contains {wanted}"
    assert {r.bug for r in report.results if r.bug} <= set(wanted)
    if data.get("offcatalogue") and wanted:
        assert any("outside the catalogue" in d.evidence for d in report.diagnosis), name


@pytest.mark.parametrize("name", cases(0))
def test_family_variant_is_named(name):
    check_file(name)


def test_the_corpus_is_complete_and_as_its_generator_writes_it():
    data = expected()
    assert sorted(p.name for p in FAMILIES.glob("*.py")) == sorted(data)
    assert len(data) >= 80
    spec = importlib.util.spec_from_file_location("make_families", CORPUS / "make_families.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, (exercise, source, bugs, offcat) in module.corpus().items():
        assert (FAMILIES / name).read_text(encoding="utf-8") == f"# attn-kit: {exercise}\n" + source, name
        assert data[name]["bugs"] == bugs and data[name]["exercise"] == exercise
        assert data[name].get("offcatalogue", "") == offcat
        assert set(bugs) <= set(catalog.exercise(exercise).bug_ids), name
    kinds = {"float32": 0, "offcatalogue": 0, "multi": 0, "correct": 0}
    for name, d in data.items():
        kinds["float32"] += name.startswith("np32_")
        kinds["offcatalogue"] += bool(d.get("offcatalogue"))
        kinds["multi"] += len(d["bugs"]) >= 2
        kinds["correct"] += d["passes"]
    assert min(kinds.values()) >= 4, kinds


@pytest.mark.parametrize("exercise", sorted(catalog.exercises()))
def test_every_family_entry_makes_forms_that_compile(exercise):
    """Each entry of prompts/families.toml still fits its bug file (an old text not found raises
    FamilyError), makes at least one form, and each form is a model the kit can run."""
    entries = [e for e in compose.family_entries() if e["exercise"] == exercise]
    textbook = {f.path.stem for f in compose.forms(exercise)}
    forms = compose.family_forms(exercise)
    for entry in entries:
        assert entry["form"] in textbook, f"{entry['form']} has no bug file in {exercise}"
        assert any(f.path.stem == entry["form"] and f.variant.startswith(entry["parameter"] + ":") for f in forms)
    assert all(form.hunks and form.bug in catalog.exercise(exercise).bug_ids for form in forms)
    if catalog.exercise(exercise).needs:  # the models import torch: a clean skip without it
        need_extra(catalog.exercise(exercise))
    for form in forms:
        module = compose.load_composed((form,))
        assert callable(getattr(module, catalog.exercise(exercise).main))


def test_a_stale_family_edit_is_an_error():
    textbook = next(f for f in compose.forms("mha-screen") if f.path.stem == "weights-transposed")
    entry = {
        "exercise": "mha-screen",
        "form": "weights-transposed",
        "parameter": "p",
        "values": ["1"],
        "edits": [["text that is nowhere", "{choice}"]],
    }
    with pytest.raises(compose.FamilyError, match="not in the code"):
        compose.family_forms_of(entry, textbook)


def test_subset_families_leave_out_the_whole_set():
    forms = [f for f in compose.family_forms("mha-screen") if f.bug == "weights-transposed"]
    assert len(forms) == 2**4 - 2  # every non-empty proper subset of Wq, Wk, Wv, Wo


def test_an_empty_row_guard_leaves_the_plain_bugs_named():
    """A file that sets rows with no allowed key to zeros itself, beside a weak fill and a transposed
    Wo: no bug model guards those rows, so the composed models are read with the file's own values
    there (kit/diagnosis/diagnose.py, _guarded_evidence), and the evidence says so."""
    report = graded(FAMILIES / "gqa_fill_m1_guarded_transposed_wo.py", SEED, "gqa")
    assert sorted(d.bug for d in report.diagnosis) == ["fill-value-too-weak", "weights-transposed"]
    assert all("no allowed key as your code guards them" in d.evidence for d in report.diagnosis)


def test_a_key_mask_on_the_query_axis_is_named_where_the_shapes_fit(tmp_path):
    """Code that puts the key mask on the query axis only when Q = K never raises, so no shape error
    shows it: the Q = K check sees it in the values and the family form 'only where the shapes fit'
    names it (the file is the reference with that one edit)."""
    from attn_kit.base.paths import solutions_dir

    need_torch()
    source = (solutions_dir("mha-masked-bias") / "reference_torch.py").read_text(encoding="utf-8")
    right = "torch.as_tensor(key_mask, dtype=torch.bool, device=device)[:, None, None, :]"
    assert source.count(right) == 1
    wrong = right.replace("[:, None, None, :]", "[:, None, :, None]")
    path = tmp_path / "square_only.py"
    path.write_text(source.replace(right, f"({wrong} if Q == K else {right})"), encoding="utf-8")
    report = graded(path, SEED, "mha-masked-bias")
    failed = {r.id: r.bug for r in report.results if r.status in ("fail", "error")}
    assert failed.get("key-mask-blocks-keys-not-queries") == "key-mask-on-query-axis", failed
    assert "output-shapes" not in failed
    assert [d.bug for d in report.diagnosis] == ["key-mask-on-query-axis"]
