"""The sandbox's parts, in-process: the data-only wire format, the kit-side mutation comparison,
source reading, and a zygote that dies or stops answering (killed and replaced, or the remaining
calls reported as crashed)."""

from __future__ import annotations

import collections
import os
import signal
import sys
import time

import numpy as np
import pytest

from attn_kit.base import wire
from attn_kit.base.errors import LoadError, UsageError
from attn_kit.base.records import ErrorInfo, Masked, Opaque, Outcome, TensorValue
from attn_kit.compare import arrays as compare
from attn_kit.load import preflight
from attn_kit.sandbox import channel as sandbox_channel
from attn_kit.sandbox import mutation, session
from attn_kit.sandbox import proctree as sandbox_proctree
from attn_kit.sandbox import zygote as sandbox_zygote

from conftest import CORPUS, TORCH_MISSING

HONEST = CORPUS / "hostile" / "honest_numpy.py"


def roundtrip(message: dict) -> dict:
    data = wire.encode(message)
    total, text = wire.read_header(data[: wire.HEADER.size])
    assert total == len(data) - wire.HEADER.size
    return wire.decode(bytearray(data[wire.HEADER.size :]), text)


def test_wire_round_trip_keeps_types_values_and_array_bytes():
    arrays = [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([True, False]),
        np.zeros((0, 4)),
        np.array([[1 + 2j]]),
        np.array(7, dtype=np.int16),
    ]
    value = {"a": arrays, 3: (1.5, float("nan"), None, "s"), (1, "k"): [True, -(2**70)]}
    got = roundtrip({"kind": "x", "value": wire.to_plain(value)})["value"]
    assert set(got) == {"a", 3, (1, "k")}
    for sent, back in zip(arrays, got["a"]):
        assert back.dtype == sent.dtype and back.shape == sent.shape and np.array_equal(back, sent)
        assert back.flags.writeable
    assert got[3][0] == 1.5 and got[3][1] != got[3][1] and got[3][2:] == (None, "s")
    assert got[(1, "k")] == [True, -(2**70)]


def test_a_masked_array_is_graded_on_its_data_only_when_nothing_is_masked():
    """The worker sends a numpy.ma array's data and mask; the kit counts the masked entries from
    the mask itself: none, and the data is the value; any, and it is no value the checks read."""
    data = np.arange(6.0).reshape(2, 3)
    none = np.ma.masked_array(data.T)  # not contiguous, nothing masked
    some = np.ma.masked_where(data > 3, data)
    got = roundtrip({"value": wire.to_plain((none, some, np.ma.masked_invalid([1.0, 2.0])))})["value"]
    assert type(got[0]) is np.ndarray and np.array_equal(got[0], data.T)
    assert type(got[2]) is np.ndarray and np.array_equal(got[2], [1.0, 2.0])
    assert isinstance(got[1], Masked) and (got[1].masked, got[1].size) == (2, 6)
    with pytest.raises(compare.ValueProblem, match=r"output contains masked entries \(2 of 6\)"):
        compare.to_array(got[1], "output")


def test_the_kit_counts_masked_entries_whatever_the_worker_says():
    """A reply whose mask does not fit its data is malformed; a mask of all False is plain data."""

    def reply(mask_shape: list[int], mask: bytes):
        text = (
            '{"value": {"$": "masked", "a": {"$": "nd", "o": 0, "dtype": "<f8", "shape": [2]}, '
            f'"m": {{"$": "nd", "o": 16, "dtype": "|b1", "shape": {mask_shape}}}}}}}'
        ).encode()
        body = text + np.ones(2).tobytes() + mask
        return wire.decode(bytearray(body), len(text))["value"]

    with pytest.raises(wire.WireError, match="masked array"):
        reply([1], b"\x01")
    assert type(reply([2], b"\x00\x00")) is np.ndarray
    assert reply([2], b"\x00\x01").masked == 1


def test_to_plain_turns_subclasses_and_namedtuples_into_plain_types():
    Pair = collections.namedtuple("Pair", "a b")

    class F(float):
        pass

    class L(list):
        pass

    class A(np.ndarray):
        def __reduce__(self):
            raise AssertionError("never pickled")

    plain = wire.to_plain(Pair(F(1.5), L([np.float64(2.0), np.bool_(True)])))
    assert type(plain) is tuple and type(plain[0]) is float and type(plain[1]) is list
    assert plain[1] == [2.0, True] and type(plain[1][1]) is bool
    arr = wire.to_plain(np.ones(3).view(A))
    assert type(arr) is np.ndarray
    assert wire.to_plain(np.array([1.0, 2.0], dtype=object)) == [1.0, 2.0]


def test_to_plain_describes_what_it_cannot_send():
    class Nasty:
        def __repr__(self):
            raise RuntimeError("no")

    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert isinstance(wire.to_plain(Nasty()), Opaque)
    assert isinstance(wire.to_plain(np.array(["x"])), Opaque)
    assert isinstance(wire.to_plain((x for x in ())), Opaque)
    level = wire.to_plain(deep)
    for _ in range(wire.MAX_DEPTH):
        level = level[0]
    assert isinstance(level, Opaque)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"$": "nd", "o": 0, "dtype": "|O8", "shape": [1]}',  # object arrays never decode
        b'{"$": "nd", "o": 0, "dtype": "<f8", "shape": [4]}',  # bytes missing
        b'{"$": "nd", "o": 8, "dtype": "<f8", "shape": [0]}',  # offset out of order
        b'{"$": "pickle", "v": "gASV"}',  # unknown tag
        b"[1, 2]",  # not a record
        b'{"$": "dict", "v": [[[1], 2]]}',  # unhashable key
        b'{"$": "dict", "v": [["k", 1]]}extra',
        b'{"$": "masked", "a": [1.0], "m": [true]}',  # a masked array not of arrays
    ],
)
def test_wire_rejects_malformed_replies(body):
    with pytest.raises(wire.WireError):
        wire.decode(bytearray(body), len(body) - (5 if body.endswith(b"extra") else 0))


def test_wire_rejects_a_reply_announced_over_the_bound():
    with pytest.raises(wire.WireError, match="MiB per reply"):
        wire.read_header(wire.HEADER.pack(wire.MAX_REPLY + 1, 10))
    with pytest.raises(wire.WireError):
        wire.read_header(wire.HEADER.pack(10, 11))


def test_read_outcome_checks_every_field():
    message = roundtrip(wire.outcome_message(Outcome("raised", error=ErrorInfo("ValueError", "m")), [1]))
    outcome, after = wire.read_outcome(message)
    assert outcome.status == "raised" and outcome.error.type == "ValueError" and after == [1]
    for bad in ({"status": "passed"}, {"seconds": "0"}, {"extra": []}, {"error": "text"}):
        with pytest.raises(wire.WireError):
            wire.read_outcome(dict(message, **bad))


@pytest.mark.slow  # imports torch
def test_tensors_travel_as_arrays_with_their_attributes():
    torch = pytest.importorskip("torch", reason=TORCH_MISSING)
    t = torch.ones(2, 3, dtype=torch.float32, requires_grad=True) * 2
    got = roundtrip({"v": wire.to_plain([t, torch.zeros(2, device="meta")])})["v"]
    assert isinstance(got[0], TensorValue) and got[0].dtype == "torch.float32" and got[0].requires_grad
    assert got[0].shape == (2, 3) and np.array_equal(got[0].array, np.full((2, 3), 2.0, np.float32))
    assert got[1].device == "meta" and got[1].shape == (2,)


def test_mutation_names_written_parts_and_dict_keys_added_or_removed():
    before = [np.ones(2), {"Wq": [[1.0]], "bq": None, "gone": 1}, [float("nan")]]
    after = [np.array([1.0, 2.0]), {"Wq": [[1.0]], "bq": None, "new": 0}, [float("nan")]]
    assert mutation.written(["x", "params", "s"], before, after) == ("x", "params['gone'] (removed)", "params['new'] (added)")
    assert mutation.written(["x"], [np.ones(2)], [np.ones(2)]) == ()
    assert mutation.values_equal(np.ones(2, np.float32), np.ones(2, np.float32))
    assert not mutation.values_equal(np.ones(2, np.float32), np.ones(2, np.float64))


def test_sandbox_reports_mutation_found_in_the_kit(tmp_path):
    path = tmp_path / "writes.py"
    path.write_text("def f(d, xs):\n    d.setdefault('k', 1)\n    xs[0] = 9\n    return 0\n")
    with session.Sandbox(str(path), timeout=5) as box:
        box.start()
        outcome = box.call("f", ({"a": 1}, [1, 2]))
        assert outcome.ok and outcome.mutated == ("d['k'] (added)", "xs")
        assert box.call("f", ({"k": 1}, [9]), echo=False).mutated == ()


def test_equal_fingerprints_mean_equal_values_and_others_are_compared_as_values():
    x = np.arange(6.0).reshape(2, 3)
    value = [x, {"Wq": x.T, "bq": None}, (1, "s", float("nan")), [True, 2.5], [[0.5, float("nan")], (1.5,)]]
    copy = [x.copy(), {"Wq": np.ascontiguousarray(x.T), "bq": None}, (1, "s", float("nan")), [True, 2.5], [[0.5, float("nan")], (1.5,)]]
    assert wire.digest(wire.to_plain(value)) == wire.digest(wire.to_plain(copy))
    written = [x + np.eye(2, 3), {"Wq": x.T, "bq": None}, (1, "s", float("nan")), [True, 2.5]]
    for other in (
        written,
        [x.astype(np.float32), *value[1:]],
        [x.reshape(3, 2), *value[1:]],
        [x, {"bq": None, "Wq": x.T}, *value[2:]],
        [x, value[1], [1, "s", float("nan")], *value[3:]],
        [*value[:4], [[0.5, 0.25], (1.5,)]],
        [*value[:4], [[0.5, float("nan")], [1.5]]],
    ):
        assert wire.digest(wire.to_plain(other)) != wire.digest(wire.to_plain(value))
    assert wire.digest([object()]) is None  # not plain data: no fingerprint at all
    assert wire.digest([10**5000]) is None  # an int too long to print: none either
    on = {d: [TensorValue(np.full(2, v), "torch.float32", d, (2,)) for v in (0.0, 1.0)] for d in ("cpu", "meta")}
    assert wire.digest(on["cpu"][0]) != wire.digest(on["cpu"][1])
    assert wire.digest(on["meta"][0]) == wire.digest(on["meta"][1])  # a meta tensor has no values
    # the same values with different fingerprints: the kit asks for the arguments and compares them
    assert wire.digest([1, 0.0]) != wire.digest([1.0, -0.0]) and mutation.values_equal([1, 0.0], [1.0, -0.0])


def test_a_differing_fingerprint_is_settled_by_comparing_the_arguments(tmp_path):
    path = tmp_path / "rewrites.py"
    path.write_text(
        "def same_values(xs):\n    xs[0] = float(xs[0])\n    xs[1] = -xs[1]\n    return 0\n\n"
        "def writes(xs):\n    xs[0] += 1\n    return 0\n\n"
        "def writes_a_huge_int(xs):\n    xs[0] = 10 ** 5000\n    return 0\n"
    )
    with session.Sandbox(str(path), timeout=5) as box:
        box.start()
        assert box.call("same_values", ([1, 0.0],)).mutated == ()  # 1 -> 1.0, 0.0 -> -0.0: equal values
        assert box.call("writes", ([1, 0.0],)).mutated == ("xs",)
        huge = box.call("writes_a_huge_int", ([1, 0.0],))  # no fingerprint, then arguments JSON cannot carry
        assert huge.status == "crashed" and "the arguments were not sent back" in huge.detail


@pytest.mark.parametrize("withheld", ["None", "time.sleep(60)"])
def test_a_worker_that_withholds_the_arguments_crashes_the_call(tmp_path, withheld):
    """A fingerprint that differs from the kit's, then no arguments (or none within the 2 s the
    kit waits for them) when the kit asks for them."""
    path = tmp_path / "withholds.py"
    path.write_text(f"""import itertools, time
import attn_kit.base.wire, attn_kit.runtime.worker
attn_kit.base.wire.digest = lambda value: "forged"
reads = itertools.count()       # the call reads Worker.after once; the kit's request, a second time
attn_kit.runtime.worker.Worker.after = property(lambda self: None if next(reads) == 0 else {withheld},
                                        lambda self, value: None)

def f(xs):
    return 0
""")
    with session.Sandbox(str(path), timeout=1) as box:
        box.start()
        started = time.monotonic()
        outcome = box.call("f", ([1, 2],))
        assert outcome.status == "crashed" and "the arguments were not sent back" in outcome.detail
        assert time.monotonic() - started < 1 + 2 * sandbox_channel.REPLY_GRACE


def kill_zygote(box) -> None:
    """SIGKILL the zygote and wait until the worker has died with it (PR_SET_PDEATHSIG chain)."""
    import time

    tree = [box.pid] + sandbox_proctree.descendants(box.pid)
    os.kill(box.launcher.zygote.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while any(sandbox_proctree.alive_worker(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(sandbox_proctree.alive_worker(p) for p in tree)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process controls")
def test_a_dead_zygote_is_replaced_and_the_next_call_works():
    with session.Sandbox(str(HONEST), timeout=5) as box:
        box.start()
        assert box.call("causal_mask", (1, 2)).ok
        first, replaced = box.launcher.zygote.pid, box.launcher.replacements
        kill_zygote(box)
        outcome = box.call("causal_mask", (1, 2))  # the worker died with its zygote
        assert outcome.status == "crashed"
        assert box.call("causal_mask", (1, 2)).ok
        assert box.launcher.zygote.pid != first and box.launcher.replacements == replaced + 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process controls")
def test_a_stopped_zygote_is_replaced_within_the_deadline(monkeypatch):
    monkeypatch.setattr(sandbox_zygote, "CONTROL_DEADLINE", 0.5)
    with session.Sandbox(str(HONEST), timeout=5) as box:
        box.start()
        replaced = box.launcher.replacements
        os.kill(box.launcher.zygote.pid, signal.SIGSTOP)
        box._drop_worker()  # asks the stopped zygote: no answer, replaced
        assert box.call("causal_mask", (1, 2)).ok
        assert box.launcher.replacements == replaced + 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process controls")
def test_when_no_zygote_can_start_the_remaining_calls_are_errors(monkeypatch):
    with session.Sandbox(str(HONEST), timeout=5) as box:
        box.start()

        def broken(*args, **kwargs):
            raise OSError("cannot start")

        monkeypatch.setattr(sandbox_zygote, "_Zygote", broken)
        kill_zygote(box)
        outcomes = [box.call("causal_mask", (1, 2)) for _ in range(3)]
        assert [o.status for o in outcomes] == ["crashed"] * 3
        assert "could not be restarted" in outcomes[-1].detail


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measured calls are Linux-only")
def test_a_worker_lost_while_its_memory_is_limited_is_a_crashed_call(monkeypatch):
    def lost(box, extra, deadline):  # as when the worker never answers the kit's request for a limit
        box._drop_worker()
        return "the worker did not answer"

    monkeypatch.setattr(session.Sandbox, "_limit_data", lost)
    with session.Sandbox(str(HONEST), timeout=5) as box:
        outcome = box.call("causal_mask", (1, 2), harness="attn_kit.runtime.bench_harness:measure_rss", memory_limit=64 << 20)
        assert outcome.status == "crashed" and "stopped" in outcome.detail
        assert box.call("causal_mask", (1, 2)).ok  # the next call gets a new worker


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measured calls are Linux-only")
def test_a_worker_let_go_after_a_measured_call_is_no_restart_but_a_crash_is():
    """The note "restarted after a hang or crash" is for the candidate's hangs and crashes, not for
    the new worker each memory-limited call is followed by by design."""
    with session.Sandbox(str(HONEST), timeout=5) as box:
        box.start()
        measured = box.call("causal_mask", (1, 2), harness="attn_kit.runtime.bench_harness:measure_rss", memory_limit=64 << 20)
        assert measured.ok and box.conn is None  # the measured worker is gone, as planned
        assert box.call("causal_mask", (1, 2)).ok and box.restarts == 0
        box._drop_worker()  # as after a hang or a crash
        assert box.call("causal_mask", (1, 2)).ok and box.restarts == 1


def test_a_file_python_has_no_loader_for_is_a_clear_load_error(tmp_path):
    text = tmp_path / "solution.txt"
    text.write_text(HONEST.read_text())
    with session.Sandbox(str(text), timeout=5) as box:
        with pytest.raises(LoadError, match=r"ImportError: .*solution\.txt is not a Python source file"):
            box.start()


def test_sources_are_read_as_python_reads_them(tmp_path):
    body = "# attn-kit: mha-screen\ndef f():\n    return 'café'\n"
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert preflight.read_source(bom).header == "mha-screen"
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n" + body).encode("latin-1"))
    assert "café" in preflight.read_source(latin).text
    wrong = tmp_path / "wrong.py"
    wrong.write_bytes(b"x = '\xff'\n")
    with pytest.raises(LoadError, match="decoded"):
        preflight.read_source(wrong)
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\n\0")
    with pytest.raises(LoadError, match="NUL byte"):
        preflight.read_source(nul)


def test_special_and_oversized_files_are_refused(tmp_path, monkeypatch):
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.py"
        os.mkfifo(fifo)
        with pytest.raises(UsageError, match="named pipe"):
            preflight.read_source(fifo)
    if os.path.exists("/dev/null"):
        with pytest.raises(UsageError, match="device"):
            preflight.read_source("/dev/null")
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 100)
    monkeypatch.setattr(preflight, "MAX_SOURCE_BYTES", 100)
    with pytest.raises(LoadError, match="bytes"):
        preflight.read_source(big)


def test_finite_differences_catch_gradients_that_are_not_the_outputs():
    pytest.importorskip("torch", reason=TORCH_MISSING)
    from attn_kit.base.torch_support import finite_difference

    def forward(acts, params):  # output = x @ w, attention = x (a smooth toy)
        return np.asarray(acts["x"]) @ np.asarray(params["w"]), np.asarray(acts["x"])

    import torch

    from attn_kit.base.torch_support import probe

    x, w = np.random.default_rng(0).normal(size=(2, 3)), np.random.default_rng(1).normal(size=(3, 2))
    p1 = probe((2, 2), 1, torch.zeros((), dtype=torch.float64)).numpy()
    p2 = probe((2, 3), 2, torch.zeros((), dtype=torch.float64)).numpy()
    right = {"x": p1 @ w.T + p2, "w": x.T @ p1}
    analytic, numeric = finite_difference(forward, {"x": x}, {"w": w}, right)
    assert abs(analytic - numeric) < 1e-6 * (1 + abs(analytic))
    wrong = {"x": right["x"], "w": np.zeros_like(w)}
    analytic, numeric = finite_difference(forward, {"x": x}, {"w": w}, wrong)
    assert abs(analytic - numeric) > 1e-3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc")
def test_without_namespaces_the_process_tree_is_still_killed(tmp_path, monkeypatch):
    """The fallback where the kernel allows no namespaces (forced with ATTN_KIT_NO_NAMESPACES):
    a double-forked daemon that cleared its death signal is killed when the worker is stopped."""
    import time

    monkeypatch.setenv("ATTN_KIT_NO_NAMESPACES", "1")
    path = tmp_path / "daemon.py"
    path.write_text(
        "import ctypes, os, time\n"
        "def start():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            ctypes.CDLL(None).prctl(1, 0)\n"
        "            time.sleep(600)\n"
        "        os._exit(0)\n"
        "    time.sleep(0.3)\n"
        "    return os.getpid()\n"
    )
    sandbox_zygote.expected_values_loaded()  # a fresh zygote that reads the variable
    launcher = sandbox_zygote.make_launcher()
    try:
        with session.Sandbox(str(path), timeout=5, launcher=launcher) as box:
            box.start()
            assert not launcher.zygote.namespaced
            outcome = box.call("start")
            assert outcome.ok
            tree = [box.pid] + sandbox_proctree.descendants(box.pid)
            assert len(tree) >= 4  # keeper, nsinit, worker, the daemon (orphaned to nsinit)
        deadline = time.monotonic() + 5
        while any(sandbox_proctree.alive_worker(p) for p in tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(sandbox_proctree.alive_worker(p) for p in tree)
    finally:
        launcher.close()


def test_a_reply_too_large_is_a_crashed_call_with_the_bound_named(tmp_path):
    path = tmp_path / "big.py"
    path.write_text('def f():\n    return "x" * (40 << 20)\n\ndef g():\n    return 1\n')
    with session.Sandbox(str(path), timeout=30) as box:
        box.start()
        outcome = box.call("f")
        assert outcome.status == "crashed" and "MiB" in outcome.detail
        assert box.call("g").value == 1
    with pytest.raises(wire.WireError, match="as text"):
        wire.read_header(wire.HEADER.pack(wire.MAX_TEXT + 1, wire.MAX_TEXT + 1))


def test_reply_text_is_bounded_by_the_call_arguments():
    import numpy as np

    small = wire.text_limit(((1.0, 2.0), {}))
    assert small == wire.TEXT_FLOOR + 2 * wire.TEXT_PER_ENTRY
    assert wire.text_limit(((np.zeros((4, 8)), [1, 2]), {"mask": None})) == wire.TEXT_FLOOR + (32 + 2 + 1) * wire.TEXT_PER_ENTRY
    assert wire.text_limit(((np.zeros((4096, 4096)),), {})) == wire.MAX_TEXT
    header = wire.HEADER.pack(small + 1, small + 1)
    with pytest.raises(wire.WireError, match="for this call"):
        wire.read_header(header, small)
    assert wire.read_header(wire.HEADER.pack(small, small), small) == (small, small)
