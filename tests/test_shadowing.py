"""A solution file named like a module it or the kit needs (`numpy.py`) is refused with a message
naming the shadowing, not left to fail with "module 'numpy' has no attribute 'array'"."""

from __future__ import annotations

import shutil

import pytest

from attn_kit.base.errors import LoadError
from attn_kit.base.paths import solutions_dir
from attn_kit.load import preflight

from helpers import attn_kit

REFERENCE = solutions_dir("mha-screen") / "reference_numpy.py"


@pytest.mark.parametrize("name,who", [("numpy.py", "your file imports"), ("torch.py", "the kit needs")])
def test_a_file_named_like_a_needed_module_is_refused_saying_why(tmp_path, name, who):
    shutil.copy(REFERENCE, tmp_path / name)
    with pytest.raises(LoadError, match=f"has the name of the module `{name[:-3]}`, which {who}"):
        preflight.read_source(tmp_path / name)


def test_other_names_are_fine(tmp_path):
    for name in ("attention.py", "numpy_solution.py", "math.py"):  # the reference does not import math
        shutil.copy(REFERENCE, tmp_path / name)
        assert preflight.read_source(tmp_path / name).path.name == name


def test_check_says_so_in_one_paragraph(tmp_path):
    shutil.copy(REFERENCE, tmp_path / "numpy.py")
    proc = attn_kit("check", tmp_path / "numpy.py")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    text = " ".join(proc.stderr.split())
    assert "hides the real `numpy`" in text and "Rename it, e.g. to numpy_solution.py" in text
    assert "has no attribute 'array'" not in text
