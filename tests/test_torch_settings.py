"""PyTorch's process-wide settings are made by the sandbox (harness_torch.settle_process) when a
zygote starts with torch loaded, not by importing a checks module."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attn_kit.sandbox.session import Sandbox

from conftest import TORCH_MISSING, need_torch

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


PROBE = """
import sys


def meta_kernels_loaded():
    return "torch._dynamo" in sys.modules  # PyTorch imports it for its first meta-device operations
"""


@pytest.mark.slow
def test_only_a_warm_zygote_loads_the_meta_device_kernels(tmp_path):
    """A grading zygote runs a few meta-device operations before its first worker (the suites check
    device placement on `meta`; the kernels' first use costs about a second, most of it importing
    torch._dynamo), so no worker pays it; a bench's or a test-tests run's zygote (warm=False) skips
    that second, since neither runs anything on `meta`."""
    need_torch()
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    loaded = {}
    for warm in (True, False):
        with Sandbox(str(path), timeout=60, preload=("torch",), warm=warm) as sandbox:
            sandbox.start()
            loaded[warm] = sandbox.call("meta_kernels_loaded", echo=False).value
    assert loaded == {True: True, False: False}
