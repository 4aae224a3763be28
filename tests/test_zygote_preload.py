"""A file that imports torch is graded from a zygote that imported torch once (pipeline.preload_for),
on a NumPy exercise too: its workers fork with torch loaded instead of importing it inside the
first call's timeout, and --locate's edited copies share that zygote."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from attn_kit.grading import locate, pipeline
from attn_kit.load import catalog
from attn_kit.sandbox import zygote

from conftest import CORPUS, need_torch
from helpers import graded

TORCH_ON_NUMPY = CORPUS / "real" / "mingpt_causal_self_attention.py"  # mha-screen, written with torch


def test_torch_joins_the_preload_only_for_files_that_import_it():
    screen, masked = catalog.exercise("mha-screen"), catalog.exercise("mha-masked-bias")
    assert not screen.needs and masked.needs == "torch"
    assert pipeline.preload_for({"numpy", "math"}, screen) == ()
    assert pipeline.preload_for({"numpy", "torch"}, screen) == ("torch",)
    assert pipeline.preload_for({"numpy"}, masked) == ("torch",)
    assert pipeline.preload_for({"torch", "numpy"}, masked) == ("torch",)


def test_locate_asks_for_the_zygote_grading_used():
    text = TORCH_ON_NUMPY.read_text(encoding="utf-8")
    assert "import torch" in text and text.startswith("# attn-kit: mha-screen")
    assert locate.preload_for(TORCH_ON_NUMPY, catalog.exercise("mha-screen")) == ("torch",)


@pytest.mark.skipif(not (sys.platform.startswith("linux") and zygote.FORKS), reason="reads the zygote's memory map in /proc")
def test_a_torch_file_on_a_numpy_exercise_is_graded_from_a_zygote_holding_torch():
    need_torch()
    report = graded(TORCH_ON_NUMPY, 1, "mha-screen", timeout=60.0)
    assert report.exercise == "mha-screen" and report.passed is False  # the corpus's verdict for it
    launcher = zygote._SHARED[(("torch",), True)]
    assert launcher.zygote is not None
    assert "libtorch" in Path(f"/proc/{launcher.zygote.pid}/maps").read_text()
