"""Writes into a call's arguments made after that call returned, through a reference the code
kept: seen at a later call (the previous call's arguments every time, one older call's in turn)
or at the end of the run (Sandbox.finish compares every call's), reported once, never for a
file that writes nothing."""

from __future__ import annotations

import time

from attn_kit.sandbox import session

KEEPER = """
import threading, time
_kept = []

def keep(d, xs):
    _kept.append((d, xs))
    return 0

def nothing(*args):
    return len(args)

def spoil(i):
    d, xs = _kept[i]
    d["k"] = 1
    xs[0] = 9
    return 0

def same_value(i):
    d, xs = _kept[i]
    xs[0] = float(xs[0])       # 1 -> 1.0: a new fingerprint, equal values
    return 0

def later(i):
    def run():
        time.sleep(0.05)
        _kept[i][0]["late"] = True
    threading.Thread(target=run, daemon=True).start()
    return 0

def raises():
    raise ValueError("no")

def hang():
    while True:
        pass
"""


def _calls(box, plan):
    """Run (fn, args) pairs; every part any of them reported, in order."""
    found = []
    for fn, args in plan:
        outcome = box.call(fn, args)
        found.extend((fn, part) for part in outcome.mutated)
    return found


def test_a_write_after_the_next_call_is_seen_at_a_later_call_once(tmp_path):
    path = tmp_path / "keeper.py"
    path.write_text(KEEPER)
    with session.Sandbox(str(path), timeout=5) as box:
        box.start()
        found = _calls(box, [("keep", ({"a": 1}, [1, 2])), ("nothing", ()), ("nothing", (1,)), ("spoil", (0,))])
        found += _calls(box, [("nothing", ())] * 4)
        late = box.finish()
    assert [part for _, part in found] == [
        "d['k'] (added) of an earlier `keep` call (written after it returned)",
        "xs of an earlier `keep` call (written after it returned)",
    ], found
    assert late == []  # each write is reported once, by the call that saw it


def test_a_write_no_later_call_compares_is_seen_at_the_end(tmp_path):
    path = tmp_path / "keeper.py"
    path.write_text(KEEPER)
    with session.Sandbox(str(path), timeout=5) as box:
        box.start()
        found = _calls(box, [("keep", ({"a": 1}, [1, 2]))] + [("nothing", (i,)) for i in range(6)])
        assert found == []
        assert box.call("later", (0,)).mutated == ()
        time.sleep(0.5)  # the thread writes between calls, after the last one
        late = box.finish()
    assert late == [("keep", "d['late'] (added)")], late


def test_no_write_reports_nothing_however_many_calls(tmp_path):
    path = tmp_path / "keeper.py"
    path.write_text(KEEPER)
    with session.Sandbox(str(path), timeout=5) as box:
        box.start()
        plan = [("keep", ({"a": i, "b": [1.5, float("nan")]}, [i, 0.0])) for i in range(12)]
        plan += [("same_value", (i,)) for i in range(12)] + [("nothing", ())] * 12
        assert _calls(box, plan) == []
        assert box.finish() == []


def test_a_raising_call_or_a_new_worker_keeps_calls_and_their_arguments_in_step(tmp_path):
    path = tmp_path / "keeper.py"
    path.write_text(KEEPER)
    with session.Sandbox(str(path), timeout=2) as box:
        box.start()
        box.call("keep", ({"a": 1}, [1]))
        assert box.call("raises", ({"c": 3}, [4])).status == "raised"  # kept by the worker too
        found = _calls(box, [("spoil", (0,)), ("nothing", ())])
        assert found == [
            ("spoil", "d['k'] (added) of an earlier `keep` call (written after it returned)"),
            ("spoil", "xs of an earlier `keep` call (written after it returned)"),
        ], found
        assert box.call("hang").status == "timeout"  # a new worker from here
        box.call("keep", ({"b": 2}, [3]))
        found = _calls(box, [("nothing", ()), ("spoil", (0,)), ("nothing", ())])
        assert [part for _, part in found] == [
            "d['k'] (added) of an earlier `keep` call (written after it returned)",
            "xs of an earlier `keep` call (written after it returned)",
        ]
        assert box.finish() == []
