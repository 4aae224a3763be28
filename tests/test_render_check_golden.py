"""`check`'s report, byte for byte: real reports of mha-screen (a pass, a known bug with its
diagnosis, a crash, the untouched starter) rendered full, --first, --full, brief (watch and the
mock) and --public, at 80 and 120 columns (and in colour at 80), compared with stored text under
tests/golden/check/. A failing report's default, and brief, is its first screen (render/screen.py);
--full and --first keep the whole report.

The stored files were written by render/check.py's report() as it was before it was split into
named steps (commit "Add a byte-for-byte test of check's report"), so a refactor of the renderer
must leave every one unchanged. After a deliberate change to what the report shows, rewrite them
with `ATTN_KIT_WRITE_GOLDEN=1 pytest tests/test_render_check_golden.py` and read the diff."""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from attn_kit.base.paths import solutions_dir
from attn_kit.load import catalog
from attn_kit.render import check, screen
from attn_kit.report.results import CheckStatus

from helpers import graded

GOLDEN = Path(__file__).resolve().parent / "golden" / "check"
WRITE = os.environ.get("ATTN_KIT_WRITE_GOLDEN") == "1"
MHA = catalog.exercise("mha-screen")
SOLUTIONS = solutions_dir("mha-screen")
SEED = 3

# the reference, except that any masked call kills the worker (os._exit): checks that pass, checks
# that crash, and a note that the worker was restarted
CRASH = """
_whole = multi_head_attention


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    if mask is not None:
        import os
        os._exit(3)
    return _whole(x, params, num_heads, mask, return_weights)
"""

FILES = {"pass": "reference_lists.py", "bug": "bugs/no-scaling.py", "mask": "bugs/mask-ignored.py", "crash": None, "starter": None}

# (case, the file, public examples only, report()'s keyword arguments)
CASES = [
    ("pass", "pass", False, {}),
    ("pass-no-exercise", "pass", False, {"exercise": None}),
    ("pass-public", "pass", True, {}),
    ("bug", "bug", False, {}),
    ("bug-first", "bug", False, {"first": True}),
    ("bug-full", "bug", False, {"first": False}),
    ("bug-brief", "bug", False, {"brief": True}),
    ("bug-public", "bug", True, {}),
    ("mask-full", "mask", False, {"first": False}),
    ("mask-first", "mask", False, {"first": True}),
    ("crash", "crash", False, {}),
    ("crash-full", "crash", False, {"first": False}),
    ("crash-first", "crash", False, {"first": True}),
    ("crash-brief", "crash", False, {"brief": True}),
    ("crash-public", "crash", True, {}),
    ("starter", "starter", False, {}),
    ("starter-brief", "starter", False, {"brief": True}),
    ("starter-public-brief", "starter", True, {"brief": True}),
    ("no-diagnosis", "no-diagnosis", False, {}),
    ("no-diagnosis-brief", "no-diagnosis", False, {"brief": True}),
    ("no-diagnosis-full", "no-diagnosis", False, {"first": False}),
    ("pass-skipped", "pass-skipped", False, {}),
]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("golden")
    crash, starter = folder / "crash.py", folder / "starter.py"
    crash.write_text((SOLUTIONS / "reference_lists.py").read_text(encoding="utf-8") + CRASH, encoding="utf-8")
    starter.write_text(MHA.starter, encoding="utf-8")
    paths = {name: SOLUTIONS / file for name, file in FILES.items() if file} | {"crash": crash, "starter": starter}
    out = {}
    for name, path in paths.items():
        for public in (False, True):
            rep = graded(path, SEED, public_only=public)
            # a fixed path in the header: the same text wherever the repository or tmp folder is;
            # and no note of the platform's (off Linux, the worker's memory cap is not applied)
            out[name, public] = dataclasses.replace(
                rep,
                path=f"solutions/mha-screen/{FILES[name] or name + '.py'}",
                notes=[n for n in rep.notes if not n.startswith("memory cap not applied")],
            )
    # a skipped check: the legend's "not checked", in a pass and in a failure
    skip = {
        "biases-absent-or-none": dataclasses.replace(
            next(r for r in out["pass", False].results if r.id == "biases-absent-or-none"), status=CheckStatus.SKIP, points=0
        )
    }
    out["pass-skipped", False] = dataclasses.replace(out["pass", False], results=[skip.get(r.id, r) for r in out["pass", False].results])
    # no diagnosis (the bug report with its diagnosis taken away), near misses, a run note and a
    # passing check's measured figure: the branches no real mha-screen report reaches on every machine
    bug = out["bug", False]
    results = [dataclasses.replace(r, notes=("peak memory 1.2 MiB",)) if r.id == "output-shapes" else r for r in bug.results]
    results = [dataclasses.replace(r, status=CheckStatus.SKIP, points=0) if r.id == "batches-are-independent" else r for r in results]
    out["no-diagnosis", False] = dataclasses.replace(
        bug,
        results=results,
        diagnosis=[],
        notes=["memory cap not applied: a test note"],
        near_misses=["closest known bug: double-scaling (a test near miss)"],
    )
    return out


def rendered(rep, width: int, colour: bool, **kw) -> str:
    out = Console(
        width=width,
        file=io.StringIO(),
        theme=check.THEME,
        **({"force_terminal": True, "color_system": "standard"} if colour else {"color_system": None}),
    )
    screen.report(rep, **{"exercise": MHA, **kw}, out=out)
    return out.file.getvalue()


@pytest.mark.parametrize(("width", "colour"), [(80, False), (120, False), (80, True)], ids=["80", "120", "80-colour"])
@pytest.mark.parametrize(("case", "name", "public", "kw"), CASES, ids=[c[0] for c in CASES])
def test_report_matches_the_stored_text(reports, case, name, public, kw, width, colour):
    text = rendered(reports[name, public], width, colour, **kw)
    stored = GOLDEN / f"{case}-{width}.{'ansi' if colour else 'txt'}"
    if WRITE:
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(text, encoding="utf-8")
    assert text == stored.read_text(encoding="utf-8"), f"{stored.name} differs (see the module docstring)"


def test_the_cases_reach_every_part_of_the_report(reports):
    """The stored texts are worth comparing: between them they show each part of a report."""
    texts = "".join(rendered(reports[name, public], 80, False, **kw) for _, name, public, kw in CASES)
    for part in (
        "✓ All",
        "public examples only",
        "matches no-scaling",
        "same cause:",
        "Diagnosis\n",
        "no known bug matches",
        "crashed",
        "restarted",
        "the first failure in full",
        "✗ also no-scaling: ",
        "● no-scaling: 137 of 137 wrong rows, in `multi_head_attention`. Fix: ",
        "● not written yet: `stable_softmax`",
        "raised, hung or crashed: ",
        "--full: each failure in full · --locate: the line to fix · --seed 3: same cases",
        "note: memory cap",
        "output-shapes: peak memory",
        "a test near miss",
        "checks that ran passed (1 not checked)",
        "– not checked",
        "1 not checked —",
        "Rerun the same cases with --seed 3",
        "Fix: ",
    ):
        assert part in texts, part
