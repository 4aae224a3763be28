"""A pre-imported interpreter that runs each `attn-kit` command the tests start in a forked process.

Most tests of the command run it the way a user does, in a process of its own, and most of that
process's CPU time is Python starting and importing the kit (about 0.2 s of a 0.3 s `check`). This
server imports the kit once (exactly as `python -m attn_kit.cli` finds it: `-P`, so nothing from
a test's folder) and forks one child per command: the child takes the test's stdin, stdout and
stderr, folder, environment and arguments, runs `attn_kit.cli.app.main()` as the installed command
does, and its exit status goes back to the test. helpers.attn_kit() drives it; what a fresh
interpreter would do differently is left to the real thing there (see helpers.FRESH_ONLY).

Run as `python -P cli_server.py FD`, FD one end of a SOCK_SEQPACKET pair. A request is one message,
the JSON of {"argv", "env", "cwd"} with the child's descriptors 0, 1 and 2 attached; the server
answers with the child's pid (8 bytes), then with its wait status (8 bytes, signed) once it ended.
It ends when the test process closes its end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import traceback

# what `attn-kit` imports before and during its commands, short of anything that holds expected
# values (attn_kit.checks, the solutions): a child of this server is as clean as a fresh command,
# so the kit still forks its zygote from it
PRELOAD = (
    "attn_kit.cli.app",
    "attn_kit.grading.pipeline",
    "attn_kit.diagnosis.diagnose",
    "attn_kit.runtime.worker",
    "attn_kit.render.check",
    "attn_kit.render.practice",
    "attn_kit.practice.progress",
    "numpy.random",
    "rich.progress",
)


def _child(request: dict, fds: list[int]) -> None:  # never returns
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = request["argv"]
    from attn_kit.cli.app import main

    try:
        main()  # ends the process itself (os._exit), as the installed command does
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - as Python ends a program on an exception nobody caught
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def serve(sock: socket.socket) -> None:
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the command's process
            sock.close()
            _child(request, fds)
        for fd in fds:
            os.close(fd)
        sock.sendall(pid.to_bytes(8, "little"))
        _, status = os.waitpid(pid, 0)
        try:
            sock.sendall(status.to_bytes(8, "little", signed=True))
        except OSError:
            return


def main(argv: list[str]) -> None:
    sock = socket.socket(fileno=int(argv[0]))
    from attn_kit.cli.common import one_blas_thread
    from attn_kit.sandbox import zygote

    one_blas_thread()  # as the command does, before NumPy is imported
    for name in PRELOAD:
        __import__(name)
    if not zygote._is_clean():  # the kit would then start its zygotes fresh: not what a user's command does
        raise SystemExit("cli_server: a preloaded module holds expected values")
    serve(sock)


if __name__ == "__main__":
    main(sys.argv[1:])
