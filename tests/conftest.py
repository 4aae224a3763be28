"""Shared fixtures: user state in a temp folder, the real CLI, grading once per session.

The helpers themselves live in tests/helpers.py (read its docstring before adding a test that
grades files); the names below are re-exported for modules that import them from conftest.
"""

from __future__ import annotations

from attn_kit.cli_common import one_blas_thread

one_blas_thread()          # as `attn-kit` does, before anything imports NumPy: in-process grading matches the CLI

import pytest  # noqa: E402 - after the BLAS setting

from helpers import CORPUS, attn_kit, bug_files, check_json, graded, reference_files, solutions_dir  # noqa: E402


@pytest.fixture(autouse=True)
def attn_home(tmp_path_factory, monkeypatch):
    """Every test gets its own user-data folder (history, progress, review cards)."""
    home = tmp_path_factory.mktemp("attn-home")
    monkeypatch.setenv("ATTN_KIT_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    return home


@pytest.fixture
def run_cli():
    return attn_kit


@pytest.fixture(scope="session", name="graded")
def graded_fixture():
    """helpers.graded: grade a file in-process, once per session per (file, seed, options)."""
    return graded


__all__ = ["attn_kit", "check_json", "bug_files", "reference_files", "solutions_dir", "CORPUS", "graded"]
