"""PyTorch's process-wide settings are made by the sandbox (harness_torch.settle_process) when a
zygote starts with torch loaded, not by importing a checks module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import TORCH_MISSING

SCRIPT = """
import sys
import torch
from multiprocessing.reduction import ForkingPickler
import torch.multiprocessing  # registers torch's shared-memory reducers
torch.set_num_threads(2)
def torch_reducers():
    return [t for t in ForkingPickler._extra_reducers if getattr(t, "__module__", "").startswith("torch")]
assert torch_reducers(), "torch registered no reducers: the test would prove nothing"
from attn_kit.sandbox import zygote as sandbox_zygote
import attn_kit.checks.mha_masked_bias
print("after-import", torch.get_num_threads(), len(torch_reducers()))
from attn_kit.sandbox import session
launcher = sandbox_zygote.make_launcher(("torch",))
print("after-launcher", torch.get_num_threads(), len(torch_reducers()))
"""


@pytest.mark.slow
def test_the_sandbox_settles_torch_not_the_checks_module():
    pytest.importorskip("torch", reason=TORCH_MISSING)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["after-import"] != "1 0"  # importing the suite changes nothing process-wide
    assert lines["after-launcher"] == "1 0"  # starting a zygote with torch does
