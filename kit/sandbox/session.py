"""Starts, feeds and stops the candidate's worker process.

Process model (Linux; see docs/threat-model.md):

    kit ── zygote ── nsinit ── worker ── (whatever the candidate's code starts)

- The zygote is forked from the kit before the kit holds any expected value or loads its own
  solutions (a replacement, or one made later in the same kit process, is a fresh interpreter
  started with exec instead, so it never holds the kit's memory). It has NumPy (and torch when the
  exercise needs it) imported, so workers start instantly. It holds no descriptor of the kit's
  but its control socket: stdin/stdout/stderr are /dev/null, it runs in its own session, is not
  dumpable, is a child subreaper and dies with the kit (PR_SET_PDEATHSIG).
- For each worker the zygote forks an `nsinit`: where the kernel allows (root, or an
  unprivileged user namespace), it is process 1 of a new PID namespace, so every process the
  candidate starts is inside it, cannot signal the kit or the zygote, and dies when nsinit dies
  (nsinit dies with the zygote, the zygote with the kit: however the kit ends). Elsewhere the
  kit and the zygote kill the worker's whole process tree (walking /proc) instead.
- The worker drops every capability, re-arms PR_SET_PDEATHSIG after each fork and runs the
  candidate's code. It answers in base/wire.py's data-only format; nothing it sends is unpickled here.

Every read and every wait has a deadline: a stopped, dead or silent worker is killed and the call
reported; a stopped, dead or silent zygote is killed and replaced, and when no replacement can
start the remaining calls are reported as crashed. Where fork is missing (Windows), workers are
started with multiprocessing's spawn (no isolation beyond a separate process).
"""

from __future__ import annotations

import time

from attn_kit.base import wire
from attn_kit.base.errors import ChannelTimeout, LoadError
from attn_kit.base.records import CallStatus, ErrorInfo, Outcome
from attn_kit.base.recordtype import record
from attn_kit.sandbox import channel as _channel
from attn_kit.sandbox import limits as _limits
from attn_kit.sandbox import mutation
from attn_kit.sandbox import proctree as _proctree
from attn_kit.sandbox import zygote as _zygote

DEFAULT_TIMEOUT = 10.0
DEFAULT_MEMORY = 2 << 30
MEMORY_POLL = 0.1  # seconds between checks of a call's processes' total memory
SWEEP_DEADLINE = 4.0  # seconds the end-of-run comparison of every call's arguments may take
MISSING_ARGUMENTS = "its reply was malformed (the arguments were not sent back); the process was stopped"
UNREAD_WRITE = "its arguments (their contents changed during a memory-limited call, too large to read back)"
# the kit resets the worker's peak memory (/proc/PID/clear_refs) before a measured call and reads it
# after; a worker that made itself non-dumpable (PR_SET_DUMPABLE 0) hides that file from a kit that is
# not root, and its own reading is the candidate's to fake: the call is then not measured at all
UNREAD_PEAK = "the worker's peak memory could not be reset in /proc: the process hid it"


class Meter:
    """Process-wide bookkeeping for a search that runs many copies of a file (locate): `deadline`
    (monotonic seconds, or None) by which every load and call of every Sandbox in this process must
    end, the later ones not run at all; and `blocked`, the seconds the workers spent neither
    computing nor waiting for a CPU during their loads and calls (asleep, waiting on a child or on
    input), read from the kernel's per-task counters while `deadline` is set (Linux)."""

    def __init__(self) -> None:
        self.deadline: float | None = None
        self.blocked = 0.0

    def left(self, limit: float) -> float:
        """`limit` seconds, or what is left before the deadline when that is less."""
        return limit if self.deadline is None else min(limit, self.deadline - time.monotonic())


METER = Meter()
OUT_OF_TIME = "not run: the time allowed for the search had run out"


def _task_seconds(pid: int | None) -> float | None:
    """CPU time plus run-queue wait of a process's main task (/proc/PID/schedstat), in seconds."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as fh:
            ran, waited = fh.read().split()[:2]
        return (int(ran) + int(waited)) / 1e9
    except (OSError, ValueError):
        return None


@record(frozen=False)
class LoadInfo:
    functions: dict[str, str]  # name -> signature text, as the candidate's file defines them
    output: str
    note: str  # e.g. "memory cap not applied: ..."
    pure: tuple[str, ...] = ()  # modules outside the standard library it imported at run time


class Sandbox:
    """One candidate file, loaded in a worker; `call` runs one of its functions."""

    def __init__(
        self,
        path: str,
        timeout: float = DEFAULT_TIMEOUT,
        memory: int | None = DEFAULT_MEMORY,
        launcher=None,
        pure: bool = False,
        preload: tuple[str, ...] = (),
        warm: bool = True,  # zygote.make_launcher: False for code that never uses torch's meta device
        reads: tuple[str, ...] | None = None,
        confine: str = "try",
        self_peak: bool = False,
        writes: tuple[str, ...] = (),
    ):
        """`reads`: what the code may read besides the kit's and Python's own files (default: the
        file's folder); `writes`: folders it may write besides its own temporary folder; `confine`:
        "require" runs nothing where the worker cannot be confined (Landlock), "try" runs it with a
        note saying so; `self_peak` (bench): the code may reset its own peak memory reading."""
        self.path = str(path)
        self.reads = None if reads is None else tuple(str(r) for r in reads)
        self.writes = tuple(str(w) for w in writes)
        self.confine = confine
        self.self_peak = self_peak
        self.timeout = timeout
        self.memory = memory
        self.pure = pure
        shared = None if launcher is not None else _zygote.shared_launcher(preload, warm)
        self.owns_launcher = launcher is None and shared is None
        self.launcher = launcher or shared or _zygote.make_launcher(preload, warm)
        self.pid: int | None = None  # the worker's keeper, and the channel to the worker: both set by
        self.conn: _channel.Channel | None = None  # start(), both None again after _drop_worker()
        self.info: LoadInfo | None = None
        self.restarts = 0  # new workers started after a hang or crash (not after a measured call)
        self._planned = False  # the last worker was let go after a measured call, as planned
        self.pure_seen: list[str] = []
        self._positional: dict[str, list[str]] = {}  # function -> its positional parameter names
        self.broken = ""  # why no worker can be started any more
        self.text_limit = wire.TEXT_FLOOR  # JSON text the next reply may hold (wire.text_limit)
        self.memory_note = ""  # why the kit stopped the worker for memory, if it did
        self.oom_kills = 0  # the kernel's OOM kill count when the last request was sent
        self._next_sum = 0.0  # when the memory of the worker's processes may be summed again
        # the echoed calls of the current worker, by their order in it (the worker's own index):
        # [fn, argument names, the arguments as the call left them, their fingerprint there]
        self._kept: dict[int, list] = {}
        self._sent = 0  # echoed calls sent to the current worker
        self._rotation = 0  # which older call to compare again next (one per call)
        self.late: list[tuple[str, str]] = []  # (fn, part) written after its call returned, found late
        self._metered: tuple[int | None, float | None] | None = None  # see _meter_start
        self._waited = 0.0  # seconds spent in _wait since _meter_start
        self._chain: tuple[int, int] | None = None  # (nsinit, worker) below the keeper, once seen alone

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self) -> _channel.Channel:
        """The worker's channel; OSError, as from a closed channel, when the worker was dropped."""
        if self.conn is None:
            raise OSError("the worker's channel is closed")
        return self.conn

    def _drop_worker(self, kill: bool = True, wait: bool = True) -> int | None:
        """Kill (or just reap) the worker and everything it started; its exit status. Without
        `wait` (closing): killed now and reaped by the zygote once it has ended, no status."""
        self._kept, self._sent = {}, 0
        if self.pid is None:
            return None
        pid, self.pid = self.pid, None
        self._chain = None
        if kill:
            self.launcher.kill(pid)
        drop = getattr(self.launcher, "drop", None)
        if kill and not wait and drop is not None:
            drop(pid)
            status = None
        else:
            status = self.launcher.status(pid, kill=kill)
        if self.conn is not None:
            self.conn.close()
        self.conn = None
        return status

    def _ended(self) -> str:
        """The worker closed its channel: make sure it is gone, and say how it ended."""
        pid = self.pid
        if pid is not None and _limits.LINUX:  # give a worker that is exiting a moment to finish
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline and _proctree.alive_worker(pid):
                time.sleep(0.005)
            if _proctree.alive_worker(pid):
                self._drop_worker(kill=True)
                return "closed its connection to the kit without answering (it was stopped)"
        return _channel.describe_exit(self._drop_worker(kill=True))

    def _read(self, deadline: float, what: str) -> tuple[dict | None, str, str]:
        """(reply, status, detail): status is '' on success, else timeout/crashed/memory."""
        try:
            return self._live().recv_reply(deadline, self.timeout, self.text_limit), "", ""
        except ChannelTimeout as exc:
            self._drop_worker()
            return None, CallStatus.CRASHED, f"its {what} was cut short: it {exc} (the process was stopped)"
        except wire.WireError as exc:
            self._drop_worker()
            return None, CallStatus.CRASHED, f"{exc}; the process was stopped"
        except (EOFError, OSError):
            how = self._ended()
            detail, status = f"the process {how}", CallStatus.CRASHED
            if "SIGKILL" in how and not self.memory_note:
                if _proctree._oom_kills() > self.oom_kills:
                    status = CallStatus.MEMORY
                    detail += "; the kernel ran out of memory and killed it"
                else:  # the kit kills only for its own reasons, and says which (memory_note)
                    detail = (
                        "the process was killed by SIGKILL, not by the kit and not for memory (the kernel reported no out-of-memory kill)"
                    )
            return None, status, detail

    def start(self) -> LoadInfo:
        """Start a worker and load the file; raise LoadError if it cannot be loaded."""
        self.text_limit = wire.TEXT_FLOOR
        if self.broken:
            raise LoadError(self.broken)
        try:
            self.pid, self.conn = self.launcher.start()
        except OSError as exc:
            self.broken = f"no worker process could be started ({exc})"
            raise LoadError(self.broken) from None
        load_timeout = METER.left(self.timeout)  # importing the file gets the same budget as one call
        if load_timeout <= 0:
            self._drop_worker()
            raise LoadError(f"{self.path}: {OUT_OF_TIME}")
        self._metered = self._meter_start()
        self.memory_note = ""
        self.oom_kills = _proctree._oom_kills() if _limits.LINUX else 0
        try:
            message = ("load", self.path, self.memory, self.pure, self.reads, self.confine, self.self_peak, self.writes)
            self._live().send(message, timeout=_zygote.CONTROL_DEADLINE)
        except (OSError, ChannelTimeout):
            raise LoadError(f"loading {self.path}: the process {self._ended()}.") from None
        deadline = time.monotonic() + load_timeout
        if not self._wait(deadline):
            self._meter_end()
            self._drop_worker()
            raise LoadError(
                f"{self.path} did not finish loading within {load_timeout:g} s: "
                "is there a loop or a long computation at the top level of the file?"
            )
        reply, status, detail = self._read(deadline, "answer to loading the file")
        self._meter_end()
        if reply is None:
            raise LoadError(f"loading {self.path}: {self.memory_note or detail}.")
        try:
            info = _read_load(reply)
        except wire.WireError as exc:
            self._drop_worker()
            raise LoadError(f"loading {self.path}: {exc}.") from None
        self._note_pure(info.pure)
        if reply["status"] == CallStatus.RAISED:
            self._drop_worker()
            raise LoadError(_load_failure_text(self.path, reply["error"], info.output))
        self.info = info
        return info

    def _note_pure(self, names) -> None:
        for name in names:
            if name not in self.pure_seen:
                self.pure_seen.append(name)

    def _wait(self, deadline: float) -> bool:
        """Wait for the worker to answer, watching the total memory of its processes."""
        if self._metered is None:
            return self._wait_for(deadline)
        began = time.monotonic()
        try:
            return self._wait_for(deadline)
        finally:
            self._waited += time.monotonic() - began

    def _wait_for(self, deadline: float) -> bool:
        first = True
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.conn is None:  # the worker was dropped: the read reports it
                return True
            if self.conn.poll(min(left, MEMORY_POLL) if (self.memory and _limits.LINUX) else left):
                return True
            if self.memory and _limits.LINUX and not first and self._over_memory():
                return True  # the worker has been killed; the read reports it
            first = False

    def _tree(self) -> list[int]:
        """Every process below the worker's keeper (self.pid), read in a few small reads while they
        are nsinit and the worker alone (proctree.chain_tree)."""
        assert self.pid is not None
        tree = _proctree.chain_tree(self.pid, self._chain)
        if self._chain is None and len(tree) == 2:
            self._chain = (tree[0], tree[1])
        return tree

    def _held_too_much(self) -> bool:
        """Whether the worker's processes hold more than the memory cap together right now (then
        the worker was stopped): checked before and after every call, however short (paced as
        _over_memory says)."""
        if not (self.memory and _limits.LINUX and self.conn is not None and self.pid is not None):
            return False
        self.memory_note = ""
        if len(self._tree()) <= 2:  # nsinit and the worker alone: its own limits hold it
            return False
        if not self._over_memory():
            return False
        self._drop_worker(kill=True)
        return True

    def _over_memory(self) -> bool:
        """Whether the worker's processes together hold more than the cap (then they are killed).
        The sum reads every process's smaps_rollup, so after one that took t seconds the next is
        taken no sooner than 4t later: a file holding a hundred processes between its calls cannot
        make the kit spend more than a fifth of its time summing them, and a few processes are
        still summed at nearly every call boundary of a short run."""
        if self.pid is None or not self.memory:
            return False
        tree = self._tree()
        if len(tree) <= 1:  # nsinit and the worker alone: RLIMIT_AS covers it
            return False
        started = time.monotonic()
        if started < self._next_sum:
            return False
        used = _proctree.resident_bytes(tree)
        self._next_sum = time.monotonic() + 4 * (time.monotonic() - started)
        if used > self.memory:
            self.memory_note = (
                f"the processes it started used {used / 2**20:,.0f} MiB together, over the memory cap of {self.memory / 2**20:,.0f} MiB"
            )
            self.launcher.kill(self.pid)
            return True
        return False

    def call(
        self,
        fn: str,
        args=(),
        kwargs=None,
        harness: str | None = None,
        timeout: float | None = None,
        echo: bool = True,
        memory_limit: int | None = None,
    ) -> Outcome:
        """Run fn(*args, **kwargs) in the worker. Hangs, crashes and MemoryError become Outcomes.
        With `echo`, the kit names the parts of the arguments the call wrote (Outcome.mutated): the
        worker sends a fingerprint of the arguments as the call left them, and the arguments
        themselves when it differs from the fingerprint of the kit's own copy.

        `memory_limit` (a measured call, Linux): just before the call the kit itself lowers the
        data limit (RLIMIT_DATA, soft and hard) of the worker and of every process it started to
        what each holds plus `memory_limit` bytes; children inherit it and the candidate's code
        cannot raise it. A call that needs more gets MemoryError (status memory); where the limit
        cannot be applied the call is reported as crashed, saying why. The worker is replaced after
        the call, since its limit cannot be raised again."""
        kwargs = dict(kwargs or {})
        failed = self._ready()
        if failed is not None:
            return failed
        limit = METER.left(self.timeout if timeout is None else timeout)
        if limit <= 0:
            return Outcome(CallStatus.TIMEOUT, detail=OUT_OF_TIME, seconds=0.0)
        self.text_limit = wire.text_limit((args, kwargs))
        before: list = wire.to_plain(list(args) + list(kwargs.values())) if echo else []  # used only with echo
        measure = bool(harness and "measure" in harness and _limits.LINUX)
        started = time.perf_counter()
        self.memory_note = ""
        if self._held_too_much():  # processes started by earlier calls, holding memory between them
            return Outcome(CallStatus.MEMORY, detail=self.memory_note, seconds=0.0)
        self.oom_kills = _proctree._oom_kills() if _limits.LINUX else 0
        recheck = self._recheck() if echo else ()
        serial = self._sent
        try:
            self._live().send(("call", fn, tuple(args), kwargs, harness, echo, measure, recheck), timeout=limit + _zygote.CONTROL_DEADLINE)
            self._sent += int(echo)
        except (OSError, ChannelTimeout):  # the worker died between calls, or reads nothing
            return Outcome(CallStatus.CRASHED, detail=f"the process {self._ended()}", seconds=time.perf_counter() - started)
        deadline = time.monotonic() + limit
        self._metered = self._meter_start()
        mine = wire.digest(before) if echo else None  # while the worker runs the call
        answered = self._answer(deadline, limit, measure, memory_limit, started)
        self._meter_end()
        if isinstance(answered, Outcome):
            return answered
        reply, status, detail, syncs, peak_bytes, unlimited = answered
        seconds = time.perf_counter() - started
        try:  # a worker under a data limit stays until its arguments have been compared
            refused = self._unmeasured(reply, measure, syncs, memory_limit, unlimited, seconds)
            if refused is not None:
                return refused
            outcome, after, final = self._received(reply, status, detail, peak_bytes, seconds)
            if final or not echo or outcome.status == CallStatus.CRASHED:  # crashed: the worker's result was too large
                return outcome
            signature = (fn, len(args), list(kwargs))
            return self._written(outcome, after, signature, before, mine, recheck, reply.get("earlier"), serial, memory_limit, seconds)
        finally:
            if memory_limit is not None and self.conn is not None:
                self.late.extend(self._sweep())  # before the worker goes: its calls' arguments, written late
                self._drop_worker()  # its data limit cannot be raised again: the next call gets a new one
                self._planned = True

    def _ready(self) -> Outcome | None:
        """Start a worker for a call if the last one was stopped; the call's Outcome if none starts."""
        if self.conn is not None:
            return None
        try:
            self.start()
        except LoadError as exc:
            return Outcome(CallStatus.CRASHED, detail=f"the worker could not be restarted: {exc}")
        self.restarts += not self._planned  # a worker let go after a measured call is no restart to report
        self._planned = False
        return None

    def _answer(self, deadline: float, limit: float, measure: bool, memory_limit: int | None, started: float):
        """Wait for the call's reply: (reply, status, detail, syncs, peak bytes, why memory_limit
        could not be applied) as _read gives the first three, or the Outcome of a call that timed out.

        A measured call: the worker stops just before and just after it (a "sync" each time); at the
        first the kit resets the worker's peak resident memory (VmHWM) and applies `memory_limit`,
        at the second it reads the peak from the kernel."""
        unlimited = ""  # why memory_limit could not be applied
        kernel, peak = None, None
        syncs = 0
        while True:
            if not self._wait(deadline):
                self._meter_end()  # before the worker goes: its CPU time is read from its counters
                self._drop_worker()
                return Outcome(
                    CallStatus.TIMEOUT,
                    detail=f"did not return within {limit:g} s (the call was stopped)",
                    seconds=time.perf_counter() - started,
                )
            reply, status, detail = self._read(deadline + min(_channel.REPLY_GRACE, limit), "reply")
            if reply is None or not (measure and syncs < 2 and reply.get("kind") == "sync"):
                break
            if syncs == 0:
                kernel = self._reset_peak()
                if memory_limit is not None:
                    unlimited = self._limit_data(memory_limit, deadline + min(_channel.REPLY_GRACE, limit))
                    if kernel is None and not unlimited:  # e.g. the code made itself non-dumpable
                        unlimited = UNREAD_PEAK
            elif kernel is not None:
                peak = _proctree.status_field(kernel[0], "VmHWM")
            syncs += 1
            try:
                self._live().send(("go",), timeout=_zygote.CONTROL_DEADLINE)
            except (OSError, ChannelTimeout):
                reply, status, detail = None, CallStatus.CRASHED, f"the process {self._ended()}"
                break
        peak_bytes = max(peak - kernel[1], 0) if kernel is not None and peak is not None else None
        return reply, status, detail, syncs, peak_bytes, unlimited

    def _unmeasured(
        self, reply: dict | None, measure: bool, syncs: int, memory_limit: int | None, unlimited: str, seconds: float
    ) -> Outcome | None:
        """The Outcome of a call that answered but whose memory was not limited or measured as
        asked, or None."""
        # a call that the data limit stopped (MemoryError) is judged on that, read peak or not
        stopped = unlimited == UNREAD_PEAK and reply is not None and reply.get("status") != CallStatus.OK
        if memory_limit is not None and (unlimited or not measure) and reply is not None and not stopped:
            why = unlimited or ("the kit measures memory only on Linux" if not _limits.LINUX else "the call was not measured")
            return Outcome(
                CallStatus.CRASHED,
                detail=f"the kit could not limit or measure the memory of this call ({why}), so the memory property is not measured",
                seconds=seconds,
            )
        if measure and reply is not None and syncs < 2 and reply.get("status") == CallStatus.OK:
            # a measured call that returned without stopping before and after it: the kernel's
            # reading of its memory is missing, and only the candidate's process could have skipped it
            self._drop_worker()
            return Outcome(
                CallStatus.CRASHED,
                detail="its reply was malformed (the measured call skipped the kit's memory reading); the process was stopped",
                seconds=seconds,
            )
        return None

    def _received(self, reply: dict | None, status: str, detail: str, peak_bytes: int | None, seconds: float):
        """(outcome, the fingerprint of the arguments the worker sent, whether the outcome is final)
        for the reply _answer waited for, or its (status, detail) when there was none."""
        if reply is None:
            if self.memory_note:
                status, detail = CallStatus.MEMORY, self.memory_note
            return Outcome(status, detail=detail, seconds=seconds), None, True
        if self._held_too_much():  # a call too short for the polling in _wait
            return Outcome(CallStatus.MEMORY, detail=self.memory_note, seconds=seconds), None, True
        try:
            outcome, after = wire.read_outcome(reply)
        except wire.WireError as exc:
            self._drop_worker()
            return Outcome(CallStatus.CRASHED, detail=f"{exc}; the process was stopped", seconds=seconds), None, True
        self._note_pure(_names(reply.get("pure")))
        if peak_bytes is not None:
            outcome.extra["kernel_peak_bytes"] = peak_bytes
        return outcome, after, False

    def _written(
        self, outcome: Outcome, after, signature, before, mine, recheck, reported, serial: int, memory_limit, seconds: float
    ) -> Outcome:
        """`outcome` with the parts of the arguments this call (and earlier calls, late) wrote. The
        worker sent a fingerprint of the arguments as the call left them (`after`); when it differs
        from the kit's own (`mine`), the kit asks for the arguments themselves and compares.
        `signature` is (fn, number of positional arguments, keyword names)."""
        if not isinstance(after, str):
            self._drop_worker()
            return Outcome(CallStatus.CRASHED, detail=MISSING_ARGUMENTS, seconds=seconds)
        fn = signature[0]
        names = self._argument_names(*signature)
        if mine is None or after != mine:  # maybe written: compare the arguments themselves
            view, problem = self._echo(len(before))
            if problem and memory_limit:
                # under the call's data limit the worker may have no room to send its
                # arguments back: their fingerprint changed, which is the evidence
                return _replace(outcome, mutated=(UNREAD_WRITE,))
            if problem:
                return Outcome(CallStatus.CRASHED, detail=problem, seconds=seconds)
            outcome = _replace(outcome, mutated=mutation.written(names, before, view))
            before = view
        earlier, problem = self._earlier_written(recheck, reported)
        if problem:
            return Outcome(CallStatus.CRASHED, detail=problem, seconds=seconds)
        if earlier:
            outcome = _replace(outcome, mutated=(*outcome.mutated, *earlier))
        if isinstance(after, str) and self.conn is not None:
            self._kept[serial] = [fn, names, before, after]
        return outcome

    def _recheck(self) -> tuple[int, ...]:
        """The earlier calls whose arguments the worker fingerprints again after the next call: the
        previous call and one older call, going down from the newest to the first and then again
        from the newest (so every call is compared again within as many calls as came before it,
        at the cost of one more fingerprint per call; all are compared at the end)."""
        serials = list(self._kept)
        if len(serials) <= 1:
            return tuple(serials)
        if not 0 <= self._rotation < len(serials) - 1:
            self._rotation = len(serials) - 2
        older = serials[self._rotation]
        self._rotation -= 1
        return (serials[-1], older)

    def _earlier_written(self, indices, fingerprints) -> tuple[tuple[str, ...], str]:
        """(the parts of earlier calls' arguments written since the kit last compared them, '') or
        ((), why the reply cannot be right): a fingerprint that differs from the kit's copy's is
        followed by the arguments themselves, compared value by value as for the call's own."""
        if not indices:
            return (), ""
        if not isinstance(fingerprints, list) or len(fingerprints) != len(indices):
            self._drop_worker()
            return (), MISSING_ARGUMENTS
        parts: list[str] = []
        for index, now in zip(indices, fingerprints):
            fn, names, then, known = self._kept[index]
            if now == known:
                continue
            self.text_limit = max(self.text_limit, wire.text_limit(then))  # that call's own bound
            view, problem = self._echo(len(then), index)
            if problem:
                return (), problem
            parts.extend(f"{part} of an earlier `{fn}` call (written after it returned)" for part in mutation.written(names, then, view))
            self._kept[index][2:] = [view, now]  # each write is reported once
        return tuple(parts), ""

    def _sweep(self) -> list[tuple[str, str]]:
        """Before a worker that still answers goes (the end of a run, a measured call's retirement):
        every earlier call's arguments compared again; (fn, part) for each written since its call
        returned and not yet reported. A worker that does not answer is stopped, reporting none;
        reading arguments back stops after SWEEP_DEADLINE seconds (the worker is then stopped),
        whatever the number of calls."""
        if self.conn is None or not self._kept:
            return []
        end = time.monotonic() + SWEEP_DEADLINE
        try:
            self._live().send(("sweep",), timeout=_zygote.CONTROL_DEADLINE)
        except (OSError, ChannelTimeout):
            return []
        deadline = time.monotonic() + _channel.REPLY_GRACE
        if not self._wait(deadline):
            self._drop_worker()
            return []
        reply, _, _ = self._read(deadline, "fingerprints")
        fingerprints = reply.get("fingerprints") if reply is not None and reply.get("kind") == "sweep" else None
        if self.conn is None or not isinstance(fingerprints, list) or len(fingerprints) != self._sent:
            return []
        found: list[tuple[str, str]] = []
        for index, known_entry in list(self._kept.items()):
            fn, names, then, known = known_entry
            now = fingerprints[index]
            if now == known:
                continue
            if time.monotonic() > end:
                self._drop_worker()
                break
            self.text_limit = max(self.text_limit, wire.text_limit(then))
            view, problem = self._echo(len(then), index)
            if problem:
                break
            found.extend((fn, part) for part in mutation.written(names, then, view))
            self._kept[index][2:] = [view, now]
        return found

    def finish(self) -> list[tuple[str, str]]:
        """At the end of a run, before close: (fn, part) of every argument some call wrote into
        after that call had returned, found when a worker was retired or now."""
        self.late.extend(self._sweep())
        found, self.late = self.late, []
        return found

    def _echo(self, count: int, index: int | None = None) -> tuple[list, str]:
        """(the `count` arguments of the last call as the worker holds them, or of the earlier call
        `index` as they are now, '') or ([], why they are missing)."""
        try:
            self._live().send(("echo",) if index is None else ("echo", index), timeout=_zygote.CONTROL_DEADLINE)
        except (OSError, ChannelTimeout):
            return [], f"the process {self._ended()}"
        deadline = time.monotonic() + _channel.REPLY_GRACE
        if not self._wait(deadline):
            self._drop_worker()
            return [], MISSING_ARGUMENTS
        reply, _, detail = self._read(deadline, "arguments sent back")
        if reply is None:
            return [], detail
        after = reply.get("after")
        if reply.get("kind") != "echo" or not isinstance(after, list) or len(after) != count:
            self._drop_worker()
            return [], MISSING_ARGUMENTS
        return after, ""

    def _meter_start(self) -> tuple[int | None, float | None] | None:
        """Where METER has a deadline: (the worker's pid, its CPU and run-queue seconds so far)."""
        if METER.deadline is None:
            return None
        tree = self._tree() if (_limits.LINUX and self.pid is not None) else []
        worker = tree[1] if len(tree) > 1 else None  # keeper -> nsinit -> worker
        self._waited = 0.0
        return worker, _task_seconds(worker)

    def _meter_end(self) -> None:
        """Add to METER.blocked the time the worker spent blocked since _meter_start while the kit
        waited for it: the kit's waiting less the worker's CPU and run-queue time (all of the
        waiting where the worker is gone or cannot be read: a stopped worker ran to the deadline).
        The kit's own work meanwhile is CPU time, counted where the budget counts CPU."""
        if self._metered is None:
            return
        worker, before = self._metered
        self._metered = None
        after = _task_seconds(worker)
        busy = after - before if (after is not None and before is not None) else 0.0
        METER.blocked += max(0.0, self._waited - busy)

    def _worker_pid(self) -> int | None:
        """The worker's pid as /proc shows it (self.pid is its keeper: keeper -> nsinit -> worker)."""
        if not _limits.LINUX or self.pid is None:
            return None
        below = _proctree.descendants(self.pid)
        parents = _proctree._parents()
        return next((p for p in below if parents.get(p) in below and parents.get(parents[p]) == self.pid), None)

    def _reset_peak(self) -> tuple[int, int] | None:
        """Reset the worker's peak resident memory (Linux clear_refs); (pid, resident bytes now)."""
        pid = self._worker_pid()
        if pid is None:
            return None
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            return None
        rss = _proctree.status_field(pid, "VmRSS")
        return None if rss is None else (pid, rss)

    def _limit_data(self, extra: int, deadline: float) -> str:  # noqa: C901 (one branch per way to cap memory)
        """Limit the data (RLIMIT_DATA, soft and hard) of the worker and every process below it to
        what each holds plus `extra` bytes, while the worker waits to start a measured call; '' or
        why it could not be done. The kit sets it with prlimit where it may (same uid, or
        CAP_SYS_RESOURCE); elsewhere it asks the worker to set its own. Either way it then reads
        every process's limit back from /proc before the call may start: a limit that is missing
        or higher is reported, never ignored (a hard limit, once lowered, cannot be raised)."""
        import resource

        worker = self._worker_pid()
        if worker is None:
            return "the worker's process was not found"
        tree = [worker, *_proctree.descendants(worker)]
        try:
            for pid in tree:
                used = _proctree.status_field(pid, "VmData")
                if used is not None:
                    resource.prlimit(pid, resource.RLIMIT_DATA, (used + extra, used + extra))
        except ProcessLookupError:
            pass
        except PermissionError:  # another uid and no CAP_SYS_RESOURCE: the worker sets its own
            try:
                self._live().send(("limit", extra), timeout=_zygote.CONTROL_DEADLINE)
                reply, _, detail = self._read(deadline, "answer")
            except (OSError, ChannelTimeout):
                return "the worker did not answer"
            if reply is None or reply.get("kind") != "sync":
                return detail or "the worker did not answer"
        except (OSError, ValueError) as exc:
            return f"prlimit failed: {exc}"
        for pid in [worker, *_proctree.descendants(worker)]:
            limit, used = _proctree.data_limit(pid), _proctree.status_field(pid, "VmData")
            if used is None or limit is None:
                if _proctree.alive_worker(pid):
                    return f"the kernel did not show the data limit of process {pid}"
                continue
            if limit > used + extra + (4 << 20):
                return f"a process of the call ({'the worker' if pid == worker else 'started earlier'}) is not under the limit"
        return ""

    def _argument_names(self, fn: str, positional: int, keywords: list[str]) -> list[str]:
        """The parameter names the arguments bind to, from the signature the file declared."""
        names = [f"argument {i + 1}" for i in range(positional)] + keywords
        if fn not in self._positional:
            text = (self.info.functions.get(fn) if self.info else None) or ""
            from attn_kit.load.preflight import parameters

            params = parameters(text) if text.startswith("(") else None
            self._positional[fn] = [p.name for p in params or () if p.kind == p.POSITIONAL_OR_KEYWORD]
        plain = self._positional[fn]
        names[: min(positional, len(plain))] = plain[:positional]
        return names

    def close(self):
        if self.conn is not None:
            try:
                self.conn.send(("stop",), timeout=1.0)
            except (OSError, ChannelTimeout):
                pass
            self._drop_worker(wait=False)  # killed now; its status is not needed
        if self.owns_launcher:
            self.launcher.close()


def _replace(outcome: Outcome, **changes) -> Outcome:
    from dataclasses import replace

    return replace(outcome, **changes)


def _names(value) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(wire.visible(str(v)[:80]) for v in value if isinstance(v, str))[:50]


def _read_load(reply: dict) -> LoadInfo:
    def malformed(what: str) -> wire.WireError:
        return wire.WireError(f"its answer to loading the file was malformed ({what})")

    if not (reply.get("kind") == "load" and reply.get("status") in (CallStatus.OK, CallStatus.RAISED)):
        raise malformed("status")
    functions = reply.get("functions")
    if not (isinstance(functions, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in functions.items())):
        raise malformed("functions")
    if not (reply["status"] == CallStatus.OK or isinstance(reply.get("error"), ErrorInfo)):
        raise malformed("error")
    output, note = reply.get("output"), reply.get("note")
    if not (isinstance(output, str) and isinstance(note, str)):
        raise malformed("output")
    return LoadInfo(
        {wire.visible(k[:200]): wire.visible(v[:2000]) for k, v in functions.items()},
        wire.visible(output[:100_000]),
        wire.visible(note[:500]),
        _names(reply.get("pure")),
    )


def _load_failure_text(path: str, error: ErrorInfo, output: str) -> str:
    if error.type in ("RefusedAsRoot", "Unconfined"):
        return f"{path} was not run: {error.message}"
    if error.type == "SyntaxError" or error.type == "IndentationError":
        text = f"{path} has a {error.type}: {error.message}"
    else:
        text = f"{path} could not be loaded: importing it raised {error.one_line()}"
        if error.traceback:
            text += "\n" + error.traceback.rstrip()
    if output.strip():
        text += f"\nIt printed:\n{output.rstrip()}"
    return text
