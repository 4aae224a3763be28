"""Helpers the hostile corpus files share (not a case): markers and the kit's processes.

A marker is a file named after what happened, holding the pid of the process that wrote it; the
test fails if any marker holds the kit's pid, or if a marker it forbids exists at all."""
import os


def mark(name: str, text: str = "") -> None:
    folder = os.environ.get("ATTN_MARKER_DIR")
    if folder:
        me = os.readlink("/proc/self") if os.path.exists("/proc/self") else str(os.getpid())
        with open(os.path.join(folder, f"{name}-{me}"), "w") as fh:
            fh.write(f"{me}\n{text}")


def token() -> str:
    return os.environ.get("ATTN_CASE_TOKEN", "no-token")


def kit_processes() -> list[int]:
    """Pids (as /proc shows them) whose command line names this case: the kit and its forks."""
    found = []
    me = os.readlink("/proc/self")
    try:
        names = os.listdir("/proc")
    except PermissionError:  # confined (Landlock) without a /proc of its own: it sees no process
        return found
    for name in names:
        if name.isdigit() and name != me:
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if token().encode() in fh.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def sleeper_argv(seconds: int = 600) -> list[str]:
    """A child that sleeps, whose command line carries the case token (so the test can find it)."""
    import sys
    return [sys.executable, "-c", f"import time; time.sleep({seconds})", token()]
