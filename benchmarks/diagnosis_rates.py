"""Measure diagnosis on many seeds: false accusations, naming rates, diagnosis time.

    python benchmarks/diagnosis_rates.py --seeds 20                  # everything
    python benchmarks/diagnosis_rates.py --seeds 5 --exercise mha-screen

Files graded (in-process, `grading.grade`):
- every bug file under solutions/*/bugs/ (single-bug: the file's bug must be named, alone);
- every reference, and tests/corpus/precision's correct float32 files (nothing may be named);
- tests/corpus/offcatalogue/ (bugs outside the catalogue: nothing may be named);
- tests/corpus/families/ (bug-family variants: every listed bug named, nothing else; its files
  with only an off-catalogue deviation count as off-catalogue, its correct files as correct);
- tests/corpus/multibug/ (every listed bug named, nothing else);
- tests/corpus/independent/ (its expectations from tests/test_diagnosis.py are not imported;
  only its correct files and off-catalogue files count, as correct and off-catalogue);
- tests/corpus/real/ (public code kept verbatim behind a layout-only adapter: every expected id
  should be named; naming an id outside its `bugs` and `also_fair` is a false accusation; the
  verdict must be its `passes`). `--real` grades only this corpus.

A false accusation is any named bug that the file does not contain. Prints a summary and, with
--json, writes every outcome. Also prints the figures the per-check fallback's naming rule saw
(agreement and share), named or not, which is how its thresholds were chosen.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from attn_kit.base.paths import bug_files, bug_id_of, reference_files  # noqa: E402
from attn_kit.diagnosis import diagnose  # noqa: E402
from attn_kit.grading import pipeline  # noqa: E402
from attn_kit.load import catalog  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
REAL_TIMEOUT = 60.0


def cases(exercises):
    out = []
    for ex in exercises:
        for path in bug_files(ex):
            out.append(("single", ex, path, {bug_id_of(path)}))
        for path in reference_files(ex):
            out.append(("correct", ex, path, set()))
    for kind, folder in (("offcatalogue", "offcatalogue"), ("multibug", "multibug"), ("correct", "precision")):
        data = tomllib.loads((CORPUS / folder / "expected.toml").read_text())
        for name, d in data.items():
            if d["exercise"] not in exercises:
                continue
            if folder == "precision" and not d.get("passes"):
                kind_here, bugs = "single", set(d["bugs"])
            else:
                kind_here, bugs = kind, set(d.get("bugs", []))
            out.append((kind_here, d["exercise"], CORPUS / folder / name, bugs))
    families = tomllib.loads((CORPUS / "families" / "expected.toml").read_text())
    for name, d in families.items():  # tests/corpus/families: variants of the bug families
        if d["exercise"] in exercises:
            kind = "correct" if d["passes"] else "offcatalogue" if not d["bugs"] else "single" if len(d["bugs"]) == 1 else "multibug"
            out.append((kind, d["exercise"], CORPUS / "families" / name, set(d["bugs"])))
    if "mha-screen" in exercises:
        for name in ("lists_correct.py", "einsum_correct.py"):
            out.append(("correct", "mha-screen", CORPUS / "independent" / name, set()))
    return out + real_cases(exercises)


def real_cases(exercises):
    """tests/corpus/real: (kind, exercise, path, bugs, ids also fair to name, the verdict it deserves)."""
    data = tomllib.loads((CORPUS / "real" / "expected.toml").read_text())
    return [
        ("real", d["exercise"], CORPUS / "real" / name, set(d["bugs"]), set(d["also_fair"]), d["passes"])
        for name, d in data.items()
        if d["exercise"] in exercises
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--exercise", action="append")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--real", action="store_true", help="grade only tests/corpus/real")
    args = parser.parse_args(argv)
    exercises = args.exercise or [e.id for e in catalog.exercises().values() if _available(e)]
    rows, times, considered = [], {}, []
    started = time.perf_counter()
    for kind, ex, path, bugs, *real in real_cases(exercises) if args.real else cases(exercises):
        exercise = catalog.exercise(ex)
        fair, expect_pass = (bugs | real[0], real[1]) if real else (bugs, not bugs and kind == "correct")
        for seed in range(1, args.seeds + 1):
            # a torch file on a NumPy exercise imports torch within one call's timeout while it loads:
            # on a loaded machine that can pass 10 s, so the real corpus gets REAL_TIMEOUT
            timeout = REAL_TIMEOUT if real else pipeline.DEFAULT_TIMEOUT
            report = pipeline.grade(path, pipeline.Options(seed=seed, exercise=ex, timeout=timeout))
            finding = diagnose.analyse(exercise, report.results)
            named = [d.bug for d in report.diagnosis]
            times.setdefault(ex, []).append((finding.seconds, finding.cpu_seconds))
            considered += [dict(c, file=path.name, kind=kind, right=c["bug"] in bugs) for c in finding.considered]
            rows.append(
                {
                    "kind": kind,
                    "exercise": ex,
                    "file": path.name,
                    "seed": seed,
                    "bugs": sorted(bugs),
                    "named": named,
                    "passed": report.passed,
                    "verdict_right": report.passed is expect_pass,
                    "false": sorted(set(named) - fair),
                    "missed": sorted(bugs - set(named)),
                    "unattributed": [
                        r.id for r in report.results if r.status in ("fail", "error") and kind == "single" and r.bug not in bugs
                    ],
                    "diagnosis_seconds": finding.seconds,
                }
            )
    print(f"{len(rows)} gradings in {time.perf_counter() - started:.0f} s, seeds 1..{args.seeds}")
    for kind in ("correct", "offcatalogue", "single", "multibug", "real"):
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        accused = sum(bool(r["false"]) for r in mine)
        line = f"{kind:13s} {len(mine):5d} gradings: false accusations {accused} "
        line += f"({accused / len(mine):.2%})"
        if kind in ("single", "multibug", "real"):
            exact = sum(not r["false"] and not r["missed"] for r in mine)
            instances = sum(len(r["bugs"]) for r in mine)
            found = sum(len(r["bugs"]) - len(r["missed"]) for r in mine)
            line += f"; all bugs named {exact / len(mine):.2%}; bugs named {found}/{instances} "
            line += f"({found / instances:.2%})"
            if kind == "single":
                checks = sum(len(r["unattributed"]) for r in mine)
                line += f"; failing checks not attributed to the file's bug: {checks}"
        if kind == "correct":
            line += f"; passed {sum(r['passed'] for r in mine)}/{len(mine)}"
        if kind == "real":
            line += f"; verdicts right {sum(r['verdict_right'] for r in mine)}/{len(mine)}"
        print(line)
        for r in mine:
            if r["false"] or r["missed"] or r["unattributed"] or not r["verdict_right"]:
                print(
                    f"    {r['exercise']} {r['file']} seed {r['seed']}: named {r['named']}, expected {r['bugs']}"
                    + (f", unattributed {r['unattributed']}" if r.get("unattributed") else "")
                )
    for ex, ts in times.items():
        wall, cpu = [t[0] for t in ts], [t[1] for t in ts]
        print(
            f"diagnosis time {ex}: wall median {statistics.median(wall) * 1000:.0f} ms, max {max(wall) * 1000:.0f} ms; "
            f"CPU median {statistics.median(cpu) * 1000:.0f} ms, max {max(cpu) * 1000:.0f} ms"
        )
    if considered:
        ok = [c for c in considered if c["right"]]
        bad = [c for c in considered if not c["right"]]
        for label, group in (("contained bug", ok), ("not contained", bad)):
            if group:
                agree = [c["agreement"] for c in group]
                share = [c["share"] for c in group]
                print(
                    f"fallback candidates, {label}: {len(group)}; named {sum(c['named'] for c in group)}; "
                    f"agreement min/max {min(agree):.2f}/{max(agree):.2f}; "
                    f"share min/max {min(share):.2f}/{max(share):.2f}"
                )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "considered": considered}, indent=1))
    return 0


def _available(exercise) -> bool:
    try:
        pipeline.require(exercise)
    except Exception:  # noqa: BLE001 - DependencyMissing
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
