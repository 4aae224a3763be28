"""Rates of `check --locate`'s value tracing and edit search on the traced corpora (issue 34).

    python benchmarks/locate_rates.py --real            # tracing only, on the failing real files
    python benchmarks/locate_rates.py --traced          # full locate on tests/corpus/locate_traced
    python benchmarks/locate_rates.py --traced --only torch_module   # files whose name has this
    python benchmarks/locate_rates.py --bugs mha-masked-bias  # tracing only (the probe call) on the
                                                      # exercise's bug files: the BUG-marked line
    python benchmarks/locate_rates.py --traced --only numpy_tiled --no-own-stages  # as before the
                                                      # exercises of checks/stages_own.py had stages

Right line: a divergence line (or the verified edit's lines) is one of the expected lines of one
mistake; the files whose only right line is that of a partial edit (verified to repair some
failing checks and break none) are counted apart. Times are kit CPU seconds (kit/grading/clock.py: this process and the processes below
it), so a loaded machine changes them less than wall time. Seed 4242, the default 10 s budget.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tomllib
from pathlib import Path

from attn_kit.base.errors import LoadError
from attn_kit.grading import pipeline
from attn_kit.grading.clock import Clock

# attn_kit.grading.locate is imported after the first grade, never at the top: it loads the stages
# (expected values), and a kit that holds them starts its zygote as a fresh interpreter, not a fork
# (sandbox/zygote.py); the CLI grades before it imports locate, and a benchmark must run as it does
# (in a fresh-interpreter zygote, tiled-softmax's memory check runs out the budget of every verify).

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "corpus" / "real"
TRACED = ROOT / "tests" / "corpus" / "locate_traced"
LOAD_TIMEOUT = 60.0  # a torch file on a loaded machine can take 10 s to import torch (tests/real_corpus.py)


def _lines(entry: dict) -> set[int]:
    lines = entry.get("lines", [])
    if isinstance(lines, dict):
        return {n for v in lines.values() for n in v}
    return set(lines)


def real(only: str) -> None:
    expected = tomllib.loads((REAL / "expected.toml").read_text())
    right = total = 0
    for name, entry in expected.items():
        if entry.get("passes") or only not in name:
            continue
        path = REAL / name
        options = pipeline.Options(seed=4242, timeout=LOAD_TIMEOUT, exercise=entry["exercise"])
        report = pipeline.grade(path, options)
        if report.passed or not _lines(entry):
            print(f"skip  {name} ({'passes' if report.passed else 'no expected line'})", flush=True)
            continue
        total += 1
        from attn_kit.grading.locate import tracing

        clock = Clock()
        traced = tracing.follow(str(path), report, LOAD_TIMEOUT, options.memory, False, ())
        lines = [d.line for d in traced.divergences] if traced else []
        hit = bool(set(lines) & _lines(entry))
        right += hit
        said = "no trace" if traced is None else "; ".join(f"{d.stage}: {d.relation}" for d in traced.divergences)
        print(
            f"{'RIGHT' if hit else 'miss '} {name:48} {entry['exercise']:18} traced {lines} expected {sorted(_lines(entry))}"
            f" ({said}) {clock.spent():.1f}s",
            flush=True,
        )
    print(f"real failing files: right line {right}/{total}")


def bug_files(exercise: str, only: str) -> None:
    """The probe call traced on each solutions/<exercise>/bugs/ file (no grading): the right line
    is a divergence on a line marked `BUG(`."""
    from attn_kit.grading.locate import tracing
    from attn_kit.report.results import Report

    right = total = 0
    for path in sorted((ROOT / "solutions" / exercise / "bugs").glob("*.py")):
        if only not in path.name:
            continue
        marked = {i for i, line in enumerate(path.read_text().splitlines(), 1) if "BUG(" in line}
        traced = tracing.follow(str(path), Report(exercise, str(path), 0, []), LOAD_TIMEOUT, None, False, ())
        lines = [d.line for d in traced.divergences] if traced else []
        hit = bool(set(lines) & marked)
        total += 1
        right += hit
        print(f"{'RIGHT' if hit else 'miss '} {path.name:48} traced {lines} marked {sorted(marked)}", flush=True)
    print(f"{exercise} bug files: right line {right}/{total}")


def traced_corpus(only: str) -> None:
    expected = tomllib.loads((TRACED / "expected.toml").read_text())
    pipeline.grade(TRACED / "bases" / "numpy_call.py", pipeline.Options(seed=4242))  # the zygote, forked from a clean kit
    from attn_kit.grading import locate

    rows: dict[int, list[tuple[bool, bool, bool, bool]]] = {}
    times = []
    for name, entry in expected.items():
        if only not in name:
            continue
        path = TRACED / name
        locate.prepare(path)
        try:
            report = pipeline.grade(path, pipeline.Options(seed=4242))
        except LoadError:  # torch's import on a loaded machine: grade it as the real corpus is graded
            report = pipeline.grade(path, pipeline.Options(seed=4242, timeout=LOAD_TIMEOUT))
        if report.passed:
            print(f"passes {name}")
            continue
        found = locate.locate(path, report, pipeline.Options(seed=4242), locate.DEFAULT_BUDGET)
        times.append(found.seconds)
        lines = _lines(entry)
        div = {d.line for d in found.trace.divergences} if found.trace else set()
        edit = found.found or found.partial
        right = bool(div & lines) or bool(found.found and set(found.found.lines) & lines)
        by_partial = not right and bool(found.partial and set(found.partial.lines) & lines)
        rows.setdefault(len(entry["mistakes"]), []).append((right, found.found is not None, found.partial is not None, by_partial))
        print(
            f"{'RIGHT' if right else 'miss '} {name:80} div {sorted(div)} edit {list(edit.lines) if edit else '-'}"
            f" expected {sorted(lines)} {found.stopped} {found.seconds:.1f}s",
            flush=True,
        )
    for n, got in sorted(rows.items()):
        k = len(got)
        print(
            f"{n}-mistake files ({k}): right line {sum(r for r, _, _, _ in got)}/{k}"
            f" (+{sum(b for _, _, _, b in got)} on a partial edit's line), verified edit {sum(f for _, f, _, _ in got)}/{k}"
            f" full + {sum(p and not f for _, f, p, _ in got)} partial"
        )
    if times:
        print(f"median kit CPU to the answer: {statistics.median(times):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--real", action="store_true")
    parser.add_argument("--traced", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--bugs", default="", help="an exercise id: trace its bug files")
    parser.add_argument("--no-own-stages", action="store_true", help="without checks/stages_own.py's stages (the rates before them)")
    args = parser.parse_args()
    if args.no_own_stages:
        from attn_kit.checks import stages_own

        stages_own.OWN.clear()
    start = time.process_time()
    if args.real:
        real(args.only)
    if args.traced:
        traced_corpus(args.only)
    if args.bugs:
        bug_files(args.bugs, args.only)
    print(f"(this process's own CPU: {time.process_time() - start:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
