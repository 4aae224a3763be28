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


__all__ = ["attn_kit", "check_json", "bug_files", "reference_files", "solutions_dir", "CORPUS"]
