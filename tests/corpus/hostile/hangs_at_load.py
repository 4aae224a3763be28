# attn-kit: mha-screen
"""Sleeps at the top level of the file."""
import time
from honest_numpy import *

time.sleep(600)
