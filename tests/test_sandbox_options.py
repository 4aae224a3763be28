"""Option values the issue found handled poorly: each is misuse (exit 2) with the option named."""

from __future__ import annotations

from click.testing import CliRunner

from attn_kit.cli import cli
from attn_kit.cli.common import parse_size


def test_a_memory_cap_under_a_byte_is_a_cap_not_no_cap():
    assert parse_size("0.0000001") == 1 and parse_size("0") is None and parse_size("0.0") is None


def test_min_score_nan_and_a_huge_history_limit_are_misuse(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_KIT_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["test-tests", str(tmp_path / "t.py"), "--min-score", "nan"])
    assert result.exit_code == 2 and "--min-score" in result.output and "not a finite number" in result.output
    result = CliRunner().invoke(cli, ["history", "--limit", "99999999999999999999"])
    assert result.exit_code == 2 and "--limit" in result.output and "database" not in result.output
