"""Shared fixtures: user state in a temp folder, the real CLI in a subprocess, bundled solutions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn_kit.paths import bug_files, reference_files, solutions_dir

CORPUS = Path(__file__).parent / "corpus"


@pytest.fixture(autouse=True)
def attn_home(tmp_path_factory, monkeypatch):
    """Every test gets its own user-data folder (history, progress, review cards)."""
    home = tmp_path_factory.mktemp("attn-home")
    monkeypatch.setenv("ATTN_KIT_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    return home


def attn_kit(*args, cwd=None, timeout=120, env=None, input=None) -> subprocess.CompletedProcess:
    """Run the installed `attn-kit` command in a subprocess, as a user would."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "attn_kit.cli", *map(str, args)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, input=input)


def check_json(path, *extra, cwd=None) -> tuple[dict, int]:
    proc = attn_kit("check", path, "--json", *extra, cwd=cwd)
    assert proc.stdout.count("\n") <= 1, f"--json printed more than one line:\n{proc.stdout}"
    return json.loads(proc.stdout), proc.returncode


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


__all__ = ["attn_kit", "check_json", "need_torch", "TORCH_MISSING", "bug_files", "reference_files", "solutions_dir", "CORPUS"]
