"""Shared fixtures: user state in a temp folder, the real CLI, grading once per session.

The helpers themselves live in tests/helpers.py (read its docstring before adding a test that
grades files); the names below are re-exported for modules that import them from conftest.

What the suite costs, per module and test, with the CPU of every process a test starts (the
sandboxed workers too, where a cgroup can count them), and the files graded again in another test
process: `ATTN_KIT_TEST_CPU=/tmp/cpu pytest; python tests/cpu_profile.py /tmp/cpu` (tests/cpu_profile.py).
Keep the full suite under 5 minutes on 2 cores and `-m "not slow"` under one: a new test that
grades files grades them through helpers.graded (one grading per process for every test that asks),
and a parametrised grading keeps one case per exercise, style or family in the quick run
(helpers.one_quick_per; test_catalogue.py's _slow).
"""

from __future__ import annotations

from attn_kit.cli.common import one_blas_thread

one_blas_thread()  # as `attn-kit` does, before anything imports NumPy: in-process grading matches the CLI

import os  # noqa: E402 - after the BLAS setting
import signal  # noqa: E402

# A shell script's background job (`pytest &`) starts with SIGINT ignored, and every process the
# tests start would inherit that: the tests that press Ctrl-C on the kit would then wait out their
# timeouts. A handler, unlike an ignored signal, is reset to the default in an exec'd child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from helpers import CORPUS, attn_kit, bug_files, check_json, graded, reference_files, solutions_dir  # noqa: E402

# hypothesis: one example of a seed property is a whole grading (0.1-1 s), so no deadline; the
# per-test user-data folder (attn_home) need not be fresh per example. Locally each run draws new
# seeds; CI (CI=true) draws the same ones every time, so a submission's CI result is reproducible.
settings.register_profile("kit", deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("kit"), derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "kit")


@pytest.fixture(autouse=True)
def attn_home(tmp_path_factory, monkeypatch):
    """Every test gets its own user-data folder (history, progress, review cards)."""
    home = tmp_path_factory.mktemp("attn-home")
    monkeypatch.setenv("ATTN_KIT_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    # pytest-xdist's workers export COLUMNS=80 and LINES=24, which rich prefers over a pseudo-
    # terminal's real size: a test that wants a width sets it itself
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    return home


@pytest.fixture
def run_cli():
    return attn_kit


# --- torch: optional for users, required in CI ----------------------------------------------------

TORCH_MISSING = "torch is not installed; the README's PyTorch paragraph installs a CPU-only build"


def need_torch():
    """torch, or a clean skip with a one-line reason. In CI (CI=true) a missing torch fails instead:
    CI installs torch==2.13.0 before the test extras, so a skip there would hide a broken install."""
    if os.environ.get("CI"):
        import torch

        return torch
    return pytest.importorskip("torch", reason=TORCH_MISSING)


def need_extra(exercise):
    """The exercise's optional dependency (torch for mha-masked-bias), or the same clean skip as
    need_torch, so the summary line counts it."""
    return need_torch() if exercise.needs == "torch" else pytest.importorskip(exercise.needs)


def _torch_skips(config) -> list:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter else {}
    return [r for r in stats.get("skipped", []) if TORCH_MISSING in str(r.longrepr)]


def pytest_terminal_summary(terminalreporter, config):
    """One line saying how many tests torch's absence skipped, whatever the -r options."""
    skipped = _torch_skips(config)
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} skipped because {TORCH_MISSING}.")


def pytest_sessionfinish(session, exitstatus):
    """Selecting only torch modules without torch is a clean skip (0), not pytest's 5, 'no tests'."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and _torch_skips(session.config):
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture(scope="session", name="graded")
def graded_fixture():
    """helpers.graded: grade a file in-process, once per session per (file, seed, options)."""
    return graded


__all__ = ["attn_kit", "check_json", "need_torch", "TORCH_MISSING", "bug_files", "reference_files", "solutions_dir", "CORPUS", "graded"]


def pytest_configure(config):
    """ATTN_KIT_TEST_CPU=FOLDER: CPU per test, written there (tests/cpu_profile.py)."""
    import cpu_profile

    cpu_profile.register(config)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one test process per core and one more. About a tenth of the suite's time is
    waiting with no CPU used (hangs stopped at their timeouts, sleeping candidates, the kit's
    pauses between polls); with one process per core a core then sits idle. Measured on 2 cores,
    the whole suite: 2 processes 200 s with 32 s of a core idle, 3 processes 187-189 s with 10 s,
    4 processes 189 s."""
    return len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1


# The modules that take longest run first: pytest-xdist (--dist loadfile) hands out whole modules in
# collection order, and one of these started last keeps one worker busy while the other waits.
# Ordered by measured time (ATTN_KIT_TEST_CPU, tests/cpu_profile.py: "per module"); a new module
# that grades many files belongs here, and one of over a fifth of the suite is better split (as
# the real corpus is, tests/real_corpus.py).
LONGEST_FIRST = (
    "test_catalogue.py",
    "test_diagnosis_corpus.py",
    "test_sandbox_hostile.py",
    "test_real_corpus.py",
    "test_real_corpus_c.py",
    "test_diagnosis_families.py",
    "test_real_corpus_b.py",
    "test_diagnosis_probes.py",
    "test_diagnosis_families_more.py",
    "test_rubric.py",
    "test_testgrade.py",
    "test_practice.py",
    "test_bench.py",
    "test_cli.py",
    "test_sandbox_corpus.py",
)


def pytest_collection_modifyitems(config, items):
    """Longest modules first (LONGEST_FIRST); the order within a module is kept."""
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
