"""The worker's process tree is read before and after every call (its processes' total memory):
while it is nsinit and the worker alone, in a few small reads (proctree.chain_tree); any other
process, started by the worker or by one of its threads, is found as the whole walk finds it.
Closing a Sandbox leaves its worker to the zygote to reap; closing a zygote waits for its end
(woken by it) within a deadline."""

from __future__ import annotations

import os
import sys
import tempfile
import time

import pytest

from attn_kit.sandbox import proctree, zygote
from attn_kit.sandbox.session import Sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

FORKS = """
import os, threading, time

def ok():
    return 1

def _child():
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)

def start_child():
    _child()
    return 1

def start_child_from_a_thread():
    thread = threading.Thread(target=lambda: (_child(), time.sleep(60)), daemon=True)
    thread.start()
    time.sleep(0.2)
    return 1
"""


@pytest.mark.parametrize("how", ["start_child", "start_child_from_a_thread"])
def test_the_short_read_of_the_tree_finds_what_the_whole_walk_finds(tmp_path, how):
    path = tmp_path / "forks.py"
    path.write_text(FORKS, encoding="utf-8")
    with Sandbox(str(path), timeout=10.0) as sandbox:
        sandbox.start()
        assert sandbox.call("ok").value == 1
        assert sandbox.pid is not None
        alone = sandbox._tree()
        assert len(alone) == 2 and sandbox._chain == tuple(alone) == tuple(proctree.children_tree(sandbox.pid))
        assert sandbox.call(how).value == 1
        walked = proctree.children_tree(sandbox.pid)
        assert len(walked) == 3  # nsinit, the worker and the candidate's process
        assert sorted(proctree.chain_tree(sandbox.pid, sandbox._chain)) == sorted(walked)
        assert sorted(sandbox._tree()) == sorted(walked)


def test_a_chain_that_is_not_the_tree_gets_the_whole_walk(tmp_path):
    path = tmp_path / "ok.py"
    path.write_text("def ok():\n    return 1\n", encoding="utf-8")
    with Sandbox(str(path), timeout=10.0) as sandbox:
        sandbox.start()
        assert sandbox.pid is not None
        walked = proctree.children_tree(sandbox.pid)
        nsinit, worker = walked
        for wrong in ((worker, nsinit), (nsinit, nsinit), (1, worker)):
            assert proctree.chain_tree(sandbox.pid, wrong) == walked


def test_closing_a_zygote_waits_for_its_end_and_no_longer_than_the_deadline():
    pid = os.fork()
    if pid == 0:  # the stand-in zygote: ends on its own, later than the first deadline
        time.sleep(0.5)
        os._exit(0)
    assert zygote._reaped_within(pid, 0.05) is False  # still running at its deadline: the caller kills it
    assert zygote._reaped_within(pid, 30.0) is True  # woken by its end, and reaped
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    assert zygote._reaped_within(pid, 1.0) is True  # a child reaped already is no wait


def test_a_closed_sandbox_is_reaped_by_the_zygote_unasked_and_the_next_one_runs(tmp_path, monkeypatch):
    """Closing a Sandbox kills its worker and leaves the reaping to the zygote (no wait for an
    answer): the zygote stays in step for the next worker, and each closed worker's folder goes."""
    kit_tmp = tmp_path / "kit-tmp"
    kit_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(kit_tmp))  # where the zygote makes its folder of worker folders
    monkeypatch.setattr(tempfile, "tempdir", str(kit_tmp))
    path = tmp_path / "ok.py"
    path.write_text("def ok():\n    return 1\n", encoding="utf-8")
    launcher = zygote.make_launcher()
    try:
        for _ in range(3):
            with Sandbox(str(path), timeout=10.0, launcher=launcher) as sandbox:
                sandbox.start()
                assert sandbox.call("ok").value == 1
        [root] = kit_tmp.iterdir()
        used = {"w1", "w2", "w3"}  # one folder per worker, in order; a spare prepared since may follow
        deadline = time.monotonic() + 30
        while used & {p.name for p in root.iterdir()} and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not used & {p.name for p in root.iterdir()}
    finally:
        launcher.close()
    assert list(kit_tmp.iterdir()) == []  # and the zygote's own folder when it ends
