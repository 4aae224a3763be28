# attn-kit: mha-screen
"""Correct, but tries to import the kit's checks and reference solutions."""
from honest_numpy import *
import honest_numpy
from hostile_util import mark

for name in ("attn_kit.checks.mha_screen", "attn_kit.solutions", "attn_kit.checks.verdicts"):
    try:
        __import__(name)
        mark("leak", name)
    except ImportError:
        pass
try:
    import importlib
    importlib.import_module("attn_kit.checks.mha_screen")
    mark("leak", "importlib")
except ImportError:
    pass
