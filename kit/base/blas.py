"""The BLAS thread default, set before NumPy is first imported. Its own module at the bottom so
the command can set it at start-up without importing the sandbox (a sixth of `attn-kit --help`)."""

import os
import sys

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """One BLAS thread unless the user chose otherwise, set before NumPy is first imported (no
    effect after). The kit and candidates multiply small matrices, where thread pools only add
    start-up cost, oversubscribe small machines and make timings jump; and a worker's measured
    call runs under a data limit where OpenBLAS cannot start its pool and waits for it until the
    call times out. The CLI sets this at start-up, a zygote for programs that grade through the
    library."""
    if "numpy" in sys.modules:
        return
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
