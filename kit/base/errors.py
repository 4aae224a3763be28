"""The kit's exceptions, all of them. The KitError family is what the user sees: only the CLI turns
them into `Error: ...` and an exit status. The rest are internal signals between the kit's own
layers (a check that failed, a value that is not an array, a reply the kit cannot read); they are
declared here too, so one module holds every exception class (a test checks it)."""

from __future__ import annotations

from typing import Any


class KitError(Exception):
    """Something the user can fix; the message says what to do next."""

    exit_code = 1


class UsageError(KitError):
    """The command was misused: no such file, unknown exercise, bad option."""

    exit_code = 2


class CatalogError(KitError):
    """A data file under prompts/ or solutions/ is malformed (a bug in the kit, not the user's)."""

    exit_code = 2


class LoadError(KitError):
    """The candidate's file cannot be graded at all: syntax error, missing function, crash on import."""

    exit_code = 1


# How to install an optional dependency, from any folder, into the environment the kit runs in:
# torch from PyTorch's CPU-only index (a few hundred MB), not PyPI's default build with several GB
# of CUDA libraries. The README gives the same command (tests/test_docs.py keeps them equal).
INSTALL = {"torch": "pip install torch --index-url https://download.pytorch.org/whl/cpu"}


class DependencyMissing(KitError):
    """An optional dependency (torch) is needed for this exercise and is not installed."""

    exit_code = 1

    @staticmethod
    def how_to_install(package: str) -> str:
        command = INSTALL.get(package, f"pip install {package}")
        return (
            f"Install it into the Python that runs attn-kit (the same activated environment, from any "
            f"folder): `{command}`"
            + (" (the CPU-only build, without gigabytes of CUDA libraries)" if package in INSTALL else "")
            + ", then run again."
        )


class StoreError(KitError):
    """The history database cannot be opened or written (disk full, permissions, locked too long)."""

    exit_code = 1


class SolutionLocked(KitError):
    """The reference solution is shown only after a pass or once every hint has been used."""

    exit_code = 1


class BenchError(KitError):
    """The solution could not be measured at all (it fails, hangs or runs out of memory at once)."""

    exit_code = 1


# --- internal signals (caught inside the kit; never shown as `Error: ...`) -----------------------


class CheckFailed(Exception):
    """The candidate's code ran but broke the property the check states."""

    def __init__(self, message: str, mismatch: Any = None):  # mismatch: a compare.Mismatch
        super().__init__(message)
        self.mismatch = mismatch


class CallFailed(Exception):
    """The candidate's code raised, hung, crashed or ran out of memory during a call."""

    def __init__(self, call: Any):  # call: a report.Call
        outcome = call.outcome
        text = f"`{call.fn}` {outcome.describe_failure()}"
        # only a call that raised carries an error of this type (base/errors.py imports nothing of the kit's)
        if outcome.error is not None and outcome.error.type == "NotImplementedError":
            text = f"`{call.fn}` is not implemented yet (it raised NotImplementedError)"
        super().__init__(text)
        self.call = call


class CheckSkipped(Exception):
    """The check does not apply here (e.g. gradients of a NumPy solution)."""


class ValueProblem(Exception):
    """A returned value is not an array of the expected shape and kind."""


class WireError(Exception):
    """A reply the kit cannot read: too large, malformed or truncated."""


class ChannelTimeout(Exception):
    """The other end did not send what it announced in time."""


class TestTimedOut(BaseException):
    """Raised inside a candidate test that ran past its time budget (not an Exception, so
    `except Exception:` in the test does not swallow it)."""

    __test__ = False  # not a test class, whatever pytest's naming rules say


class ArchiveRefused(Exception):
    """A submitted archive the kit will not extract (an unsafe name, a link, too large): why."""


class ForgedReading(Exception):
    """A timing or memory reading that cannot have been measured (NaN, infinite, negative, not a
    number): the bench harness runs in the candidate's process, which changed it."""


class ProbeSilent(Exception):
    """A diagnosis probe cannot answer: a call raised, returned no readable value, or the budget ran out."""


class UnsafePath(OSError):
    """A folder or file the kit will not write through (a symlink, someone else's folder)."""


class FamilyError(ValueError):
    """An entry of prompts/families.toml that no longer fits its bug file (an old text not found)."""
