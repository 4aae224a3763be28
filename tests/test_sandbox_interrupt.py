"""Ctrl-C during `attn-kit check`: the kit stops, says so, and leaves nothing running.

Two moments: a call that hangs (the kit waits on the worker), and calls whose replies are as large
as the kit accepts (the kit is busy reading and decoding). SIGINT is sent to the kit once the
candidate's code has run; the kit must exit with 130, print "Interrupted." and no traceback, and
no process carrying the run's token may be left. The time from the signal to the exit is recorded
in the test's output (`-rA` shows it), not asserted against a tight bound: the machine is shared,
so the deadline is a generous 10 s, as for the other waits in these tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from helpers import processes_left

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc")]

DEADLINE = 10.0  # seconds from SIGINT to the kit's exit

HANGS = """
    import time
    from honest_numpy import *  # noqa: F403

    def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
        open(READY, "w").close()
        time.sleep(600)
    """

# a well-formed reply of about 4 MB of JSON text, written straight onto the channel from every
# call (the most the kit reads for a small call's reply): the kit spends its time decoding
LARGE_REPLIES = """
    import json, os, socket, struct
    from honest_numpy import *  # noqa: F403

    _VALUE = b"[" + b"[0.125]," * 499_999 + b"[0.125]]"
    _TEXT = json.dumps({"kind": "outcome", "status": "ok", "value": "@", "error": None, "output": "",
                        "detail": "", "seconds": 0.0, "extra": {}, "after": None}).encode().replace(b'"@"', _VALUE)
    _REPLY = struct.pack("!QI", len(_TEXT), len(_TEXT)) + _TEXT

    def _send():
        open(READY, "w").close()
        for fd in map(int, os.listdir("/proc/self/fd")):
            try:
                s = socket.socket(fileno=os.dup(fd))
            except OSError:
                continue
            if s.type == socket.SOCK_STREAM:
                s.sendall(_REPLY)
                os._exit(0)
            s.close()

    def stable_softmax(scores, allowed=None):
        _send()

    def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
        _send()
    """


@pytest.mark.parametrize("body", [HANGS, LARGE_REPLIES], ids=["hanging-call", "largest-replies"])
def test_ctrl_c_stops_the_kit_with_130_and_leaves_nothing(tmp_path, body, record_property):
    tmp_path.chmod(0o777)  # run as root, the candidate's code runs as an unprivileged uid
    ready = tmp_path / "ready"
    (tmp_path / "honest_numpy.py").write_bytes((Path(__file__).parent / "corpus" / "hostile" / "honest_numpy.py").read_bytes())
    solution = tmp_path / "solution.py"
    solution.write_text(f"# attn-kit: mha-screen\nREADY = {str(ready)!r}\n" + textwrap.dedent(body), encoding="utf-8")
    token = f"attn-kit-interrupt-{uuid.uuid4().hex}"
    # the candidate writes `ready` into tmp_path (ATTN_KIT_ALSO_WRITABLE: confined, it writes nowhere else)
    env = dict(
        os.environ, ATTN_KIT_HOME=str(tmp_path / "home"), NO_COLOR="1", ATTN_INTERRUPT_TOKEN=token, ATTN_KIT_ALSO_WRITABLE=str(tmp_path)
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "attn_kit.cli", "check", str(solution), "--timeout", "60", "--seed", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert ready.exists(), f"the candidate's code never ran: {proc.poll()}"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=DEADLINE + 30)
        seconds = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    record_property("seconds_from_sigint_to_exit", round(seconds, 3))
    print(f"exit {seconds:.3f} s after SIGINT")  # noqa: T201 - reported (-s), never asserted tight
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-2000:])
    assert "Interrupted." in err and "Traceback" not in out + err, err[-2000:]
    assert seconds < DEADLINE, f"the kit took {seconds:.1f} s to stop after Ctrl-C"
    left = processes_left(token)
    assert not left, f"processes left after Ctrl-C: {left}"
