# attn-kit: mha-screen
"""Calls os._exit(0) while the file is imported."""
import os
from honest_numpy import *

os._exit(0)
