"""The candidate's process: loads the solution file and runs the calls the kit sends.

Nothing here knows expected values. The kit sends ("load", ...) once, then ("call", ...) messages,
and gets plain data back (base/wire.py: JSON plus raw array bytes, never pickle). This is the one place that catches bare exceptions:
whatever the candidate's code does, the worker answers with a record instead of dying.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import io
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from attn_kit.base import wire
from attn_kit.base.records import CallStatus, ErrorInfo, Opaque, Outcome

OUTPUT_LIMIT = 4000  # characters of captured output kept per call
FILE_SIZE_LIMIT = 16 << 20  # a runaway print loop stops at 16 MiB instead of filling the disk
_KIT_DIR = str(Path(__file__).resolve().parent.parent)  # attn_kit/
REFUSED = "RefusedAsRoot"  # the error type of a load the worker refused (it could not leave root)
UNCONFINED = "Unconfined"  # ... or it could not be confined, and the kit requires it
NO_CONFINEMENT = "confinement not applied (this platform has no Landlock): the code can read every file you can and use the network"


def _candidate_frames(tb, path: str) -> tuple[str, str]:
    """Format only the frames outside the kit; return (where, traceback text)."""
    frames = [f for f in traceback.extract_tb(tb) if not f.filename.startswith((_KIT_DIR, "<frozen"))]
    where = ""
    if frames:
        last = frames[-1]
        where = f"{Path(last.filename).name}:{last.lineno} in {last.name}"
    return where, "".join(traceback.format_list(frames))


def error_info(exc: BaseException, path: str = "") -> ErrorInfo:
    where, text = _candidate_frames(exc.__traceback__, path)
    if isinstance(exc, SystemExit):
        return ErrorInfo("SystemExit", f"the code called sys.exit({exc.code!r})", where, text)
    message = str(exc)
    if len(message) > 500:
        message = message[:500] + " …"
    return ErrorInfo(type(exc).__name__, message, where, text)


class _Capture:
    """Sends file descriptors 1 and 2 to a temporary file, so C-level output is caught too."""

    def __init__(self):
        self.file = tempfile.TemporaryFile(mode="w+b")
        for fd in (1, 2):
            os.dup2(self.file.fileno(), fd)
        sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(1), "wb", buffering=0), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(2), "wb", buffering=0), write_through=True)

    def take(self) -> str:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        size = self.file.seek(0, os.SEEK_END)
        self.file.seek(0)
        head = self.file.read(OUTPUT_LIMIT).decode("utf-8", "replace")
        self.file.seek(0)
        self.file.truncate()
        if size > OUTPUT_LIMIT:
            head += f"\n… [output truncated: {size:,} bytes in all, first {OUTPUT_LIMIT:,} shown]"
        return head


def _detach_stdin() -> None:
    try:
        fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the worker
    except OSError:
        pass


def apply_limits(memory_bytes: int | None) -> str:
    """Cap memory and file size where the platform allows; return a note when it does not."""
    try:
        import resource
    except ImportError:
        return "memory cap not applied: the resource module is not available on this platform"
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writing past the cap raises OSError instead
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    except (ValueError, OSError):
        pass
    if not memory_bytes:
        return ""
    if sys.platform.startswith("linux"):
        # RLIMIT_AS counts every mapping (heap, anonymous and shared mmap, files, thread stacks);
        # RLIMIT_DATA is kept as well. Both are on top of what the process already uses, and both
        # are inherited by every process the candidate's code starts; the sandbox also adds up
        # the resident memory of the worker and all its descendants while a call runs.
        notes = []
        for name, base in (("RLIMIT_AS", _status_bytes("VmSize")), ("RLIMIT_DATA", _status_bytes("VmData"))):
            limit = base + memory_bytes
            try:
                resource.setrlimit(getattr(resource, name), (limit, limit))
            except (ValueError, OSError) as exc:
                notes.append(f"{name}: {exc}")
        return f"memory cap not fully applied ({'; '.join(notes)})" if notes else ""
    return "memory cap not applied: only enforced on Linux (macOS ignores RLIMIT_DATA for mmap)"


def _status_bytes(field: str) -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# --- what the candidate's code may import ------------------------------------------------------

# never importable in the worker (and, confined, not even readable there: sandbox/confinement.py)
_HIDDEN = ("attn_kit.checks", "attn_kit.solutions")


def _kit_private(name: str) -> bool:
    return any(name == h or name.startswith(h + ".") for h in _HIDDEN)


def _top(name: str) -> str:
    return name.partition(".")[0]


def _outside_stdlib(name: str) -> bool:
    top = _top(name)
    return top not in sys.stdlib_module_names and top not in ("__main__", "__future__", "attn_kit") and not top.startswith("_attn_kit")


class _ImportGuard:  # a meta path finder (importlib.abc's base class costs the kit's start-up 2 ms of imports)
    """First on sys.meta_path in the worker. The kit's checks and solutions cannot be imported.
    Under --pure, modules outside the standard library that were loaded before the candidate's
    file (NumPy, preloaded by the zygote) are taken out of sys.modules, as in a fresh
    interpreter; importing one again (import, __import__, importlib) puts it back and is
    recorded as a --pure violation."""

    def __init__(self, pure: bool):
        self.pure = pure
        self.recording = False  # True while the candidate's code runs (not while the kit unpickles)
        self.stash: dict[str, object] = {}
        self.violations: list[str] = []
        if pure:
            for name in list(sys.modules):
                if _outside_stdlib(name):
                    self.stash[name] = sys.modules.pop(name)
        for name in list(sys.modules):
            if _kit_private(name):
                del sys.modules[name]

    def find_spec(self, name, path=None, target=None):
        if _kit_private(name):
            raise ModuleNotFoundError(
                f"No module named {name!r} (the kit's own checks and solutions are not available to the code being graded)", name=name
            )
        if self.pure and _outside_stdlib(name):
            if self.recording and _top(name) not in self.violations:
                self.violations.append(_top(name))
            if name in self.stash:
                return importlib.util.spec_from_loader(name, _Restore(self.stash[name]))
        return None


class _Restore:  # a loader: create_module and exec_module are all the import system calls
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass

    def load_module(self, fullname: str):  # the legacy protocol, never called while exec_module exists
        return self.module


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies; re-armed after every fork."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


class Worker:
    def __init__(self, conn):
        self.conn = conn
        self.module = None
        self.path = ""
        self.capture: _Capture | None = None
        self.guard: _ImportGuard | None = None
        self.after = None  # the last call's arguments as it left them, for an "echo" request
        self.refused = ""  # why the candidate's code must not run here (still root)
        self.kept: list[list] = []  # every echoed call's arguments themselves (the objects it was given)
        self.confine = None  # the sandbox's confinement, applied just before the file is loaded

    def load(
        self,
        path: str,
        memory_bytes: int | None,
        pure: bool = False,
        reads: tuple | None = None,
        policy: str = "try",
        self_peak: bool = False,
        writes: tuple = (),
    ) -> dict:
        """Load the candidate's file. Just before it runs, the worker enters its confinement:
        it may read `path` and `reads` (by default the file's folder), write `writes` and its own
        temporary folder. `policy` "require": a worker that cannot be confined runs nothing."""
        if self.refused:
            return _refusal(REFUSED, self.refused)
        note = apply_limits(memory_bytes)
        _detach_stdin()  # input() must not read (or steal) the user's keystrokes
        self.capture = capture = _Capture()
        self.path = path
        wire._np()  # the encoder keeps its own NumPy, whatever --pure hides
        self.guard = guard = _ImportGuard(pure)
        sys.meta_path.insert(0, guard)
        folder = str(Path(path).resolve().parent)
        sys.path.insert(0, folder)
        stem = Path(path).stem
        name = stem if stem.isidentifier() else "solution"
        confined, told = (
            self.confine(path, tuple(reads or (folder,)), self_peak, tuple(writes)) if self.confine else (False, NO_CONFINEMENT)
        )
        if not confined and policy == "require":
            return _refusal(UNCONFINED, told)
        note = "; ".join(n for n in (note, told) if n)
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:  # no loader for the file's suffix
                raise ImportError(f"{path} is not a Python source file (name it with .py)")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            guard.recording = True
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001 - the worker's one top-level handler
            guard.recording = False
            return {
                "kind": "load",
                "status": CallStatus.RAISED,
                "error": error_info(exc, path),
                "output": capture.take(),
                "note": note,
                "functions": {},
                "pure": self._violations(),
            }
        guard.recording = False
        self.module = module
        functions = {}
        for attr, obj in list(vars(module).items()):
            try:
                if callable(obj) and not attr.startswith("__") and not isinstance(obj, type):
                    try:
                        functions[str(attr)] = str(inspect.signature(obj))
                    except (TypeError, ValueError):
                        functions[str(attr)] = "(...)"
            except Exception:  # noqa: BLE001 - an attribute whose callable() check raises
                continue
        return {
            "kind": "load",
            "status": CallStatus.OK,
            "functions": functions,
            "output": capture.take(),
            "note": note,
            "error": None,
            "pure": self._violations(),
        }

    def _violations(self) -> list[str]:
        return list(self.guard.violations) if self.guard else []

    def _sync(self) -> None:
        """A measured call: tell the kit the call starts (or ended) and wait for its go-ahead. The
        kit may first ask for a data limit (where it cannot set one itself): it is set, soft and
        hard, and the kit checks it in /proc before it lets the call run."""
        self.conn.send_bytes(wire.encode({"kind": "sync"}))
        message = pickle.loads(self.conn.recv_bytes())  # from the kit: trusted
        if message[0] == "limit":
            try:
                import resource

                limit = _status_bytes("VmData") + int(message[1])
                resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
            except (ImportError, ValueError, OSError):
                pass  # the kit sees the limit missing and reports it
            self.conn.send_bytes(wire.encode({"kind": "sync"}))
            self.conn.recv_bytes()

    def call(
        self, fn_name: str, args: tuple, kwargs: dict, harness: str | None, echo: bool = True, measure: bool = False, recheck: tuple = ()
    ) -> dict:
        """Run one function; the reply carries its result and, when `echo`, the fingerprint of the
        arguments as the call left them (wire.digest). The kit compares it with its own copy's and
        asks for the arguments themselves ("echo") only when the two differ. `recheck` lists
        earlier calls (their order since the load) whose arguments are fingerprinted again after
        this call: a write made after such a call returned, through a reference the code kept,
        changes its fingerprint."""
        guard, capture = self.guard, self.capture
        if guard is None or capture is None:
            raise RuntimeError("the kit asked for a call before a load")
        fn = getattr(self.module, fn_name, None)
        start = time.perf_counter()
        extra = {}
        if not callable(fn):
            status, value, error = CallStatus.RAISED, None, ErrorInfo("AttributeError", f"the file defines no function {fn_name}")
        else:
            if measure:
                self._sync()
            guard.recording = True
            try:
                if harness:
                    module_name, _, func = harness.partition(":")
                    value, extra = getattr(importlib.import_module(module_name), func)(fn, *args, **kwargs)
                else:
                    value = fn(*args, **kwargs)
                status, error = CallStatus.OK, None
            except BaseException as exc:  # noqa: BLE001 - the worker's one top-level handler
                status, value, error = CallStatus.RAISED, None, error_info(exc, self.path)
            guard.recording = False
            if measure:
                self._sync()
        seconds = time.perf_counter() - start
        output = capture.take()
        detail = ""
        if status == CallStatus.RAISED and error is not None and error.type == "MemoryError":
            status, detail = CallStatus.MEMORY, "ran out of memory (MemoryError under the kit's memory cap)"
        self.after = wire.to_plain(list(args) + list(kwargs.values())) if echo else None
        outcome = Outcome(
            status,
            wire.to_plain(value) if status == CallStatus.OK else None,
            error,
            (),
            output,
            detail,
            seconds,
            wire.to_plain(extra) if isinstance(extra, dict) else {},
        )
        # no fingerprint (an int too long to print): "" matches none, so the kit asks for the arguments
        message = wire.outcome_message(outcome, (wire.digest(self.after) or "") if echo else None)
        message["pure"] = self._violations()
        # earlier calls' arguments as they are now: a write made after such a call returned
        # (through a reference the code kept) changes its fingerprint
        message["earlier"] = [self._fingerprint(i) for i in recheck if isinstance(i, int)]
        if echo:
            self.kept.append(list(args) + list(kwargs.values()))
        return message

    def _fingerprint(self, index: int) -> str:
        """The fingerprint of an earlier call's arguments as they are now ('' when there is none)."""
        if not 0 <= index < len(self.kept):
            return ""
        return wire.fingerprint(self.kept[index]) or ""

    def _reply(self, kind: str, arguments) -> bytes:
        """The encoded answer to a load or call request, within the kit's bounds."""
        reply = self.load(*arguments) if kind == "load" else self.call(*arguments)
        try:
            data = wire.encode(reply)
        except Exception as exc:  # noqa: BLE001 - e.g. an integer too long for JSON
            reply["value"] = Opaque(type(reply.get("value")).__name__, f"could not be sent back: {exc}"[:200])
            reply["extra"] = {}
            data = wire.encode(reply)
        if _too_large(data):
            reply.update(value=Opaque("reply", "the result was too large to send back"), extra={})
            reply["status"] = CallStatus.CRASHED if reply.get("kind") == "outcome" else reply["status"]
            reply["detail"] = (
                f"its result was larger than the kit's limit of {wire.MAX_REPLY >> 20} MiB "
                f"per reply ({wire.MAX_TEXT >> 20} MiB of it as lists and numbers)"
            )
            data = wire.encode(reply)
        return data

    def serve(self):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the kit's to handle
        os.register_at_fork(after_in_child=_die_with_parent)
        while True:
            try:
                data = self.conn.recv_bytes()
            except (EOFError, OSError):
                return
            message = pickle.loads(data)  # from the kit: trusted
            del data  # not held while the candidate's code runs
            kind = message[0]
            if kind == "stop":
                return
            if kind == "echo":  # the last call's arguments, or an earlier call's as they are now
                index = message[1] if len(message) > 1 else None
                data = _echo_reply(
                    self.after if index is None else wire.to_plain(self.kept[index]) if 0 <= index < len(self.kept) else None
                )
            elif kind == "sweep":  # the fingerprints of every earlier call's arguments as they are now
                data = wire.encode({"kind": "sweep", "fingerprints": [self._fingerprint(i) for i in range(len(self.kept))]})
            else:
                data = self._reply(kind, message[1:])
            try:
                self.conn.send_bytes(data)
            except OSError:
                return


def _refusal(kind: str, why: str) -> dict:
    """The answer to a load that runs none of the candidate's code."""
    return {
        "kind": "load",
        "status": CallStatus.RAISED,
        "error": ErrorInfo(kind, why),
        "output": "",
        "note": "",
        "functions": {},
        "pure": [],
    }


def _too_large(data: bytes) -> bool:
    """Over the kit's bound for one reply, or for its JSON part."""
    return len(data) - wire.HEADER.size > wire.MAX_REPLY or wire.HEADER.unpack(data[: wire.HEADER.size])[1] > wire.MAX_TEXT


def _echo_reply(after) -> bytes:
    """The last call's arguments, which the kit asked for; none when they cannot be sent (an int
    too long for JSON, too large), which the kit reports as a crashed call."""
    try:
        data = wire.encode({"kind": "echo", "after": after})
    except Exception:  # noqa: BLE001 - e.g. an integer too long for JSON
        return wire.encode({"kind": "echo", "after": None})
    return wire.encode({"kind": "echo", "after": None}) if _too_large(data) else data


def serve(conn, refused: str = "", confine=None) -> None:
    """Answer the kit's requests; `refused` (the worker is still root, see sandbox._drop_privileges)
    makes every load fail with that message, before any of the candidate's code runs. `confine`
    (path, reads, self_peak, writes) -> (confined, note) is the sandbox's confinement (Landlock),
    entered by the worker just before the file runs; without one the worker is unconfined."""
    worker = Worker(conn)
    worker.refused = refused
    worker.confine = confine
    worker.serve()
