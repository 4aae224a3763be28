"""Small records that cross the process boundary between the kit and the candidate's worker.

Only the standard library here: the worker imports this module, and so does the kit.
"""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum
from typing import Any

from attn_kit.base.recordtype import record

# The exact builtin types that are plain data as they are: they cross the boundary, are copied and
# are fingerprinted without conversion (a subclass is not among them: its methods could be anyone's).
ATOMS = frozenset((type(None), bool, int, float, str))


class CallStatus(StrEnum):
    """What one call of the candidate's code did. StrEnum: JSON, the wire format and the history
    database keep the same strings."""

    OK = "ok"
    RAISED = "raised"
    TIMEOUT = "timeout"  # stopped at its deadline
    CRASHED = "crashed"  # the process died, or its reply was unreadable
    MEMORY = "memory"  # ran out of memory under the kit's cap


class TestOutcome(StrEnum):
    """What one of the candidate's own tests did under `test-tests` (harness_pytest records it in
    the worker, testgrade reads it in the kit)."""

    __test__ = False  # not a test class, whatever pytest's naming rules say

    PASSED = "passed"
    FAILED = "failed"  # an assertion in the test's call phase
    ERROR = "error"  # an exception in set-up, teardown or the harness
    SKIPPED = "skipped"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    MEMORY = "memory"


@record
class ErrorInfo:
    """An exception raised by the candidate's code, with the candidate's own frames only."""

    type: str
    message: str
    where: str = ""  # "solution.py:12 in multi_head_attention"
    traceback: str = ""  # the candidate's frames, formatted

    def one_line(self) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        return f"{text} (at {self.where})" if self.where else text


@record
class TensorValue:
    """A torch tensor returned by the candidate, as data plus the attributes checks look at."""

    array: Any  # numpy array with the tensor's values (detached, on the CPU)
    dtype: str  # "torch.float32"
    device: str  # "cpu", "meta"
    shape: tuple[int, ...]
    requires_grad: bool = False


@record
class Opaque:
    """A returned object that could not be sent back (not an array, list or number)."""

    type_name: str
    text: str = ""


@record
class Masked(Opaque):
    """A NumPy masked array the candidate returned with masked entries. The kit counted them from
    the mask the worker sent: a masked entry is not a value, so the array is not graded on its
    data (one without masked entries arrives as its plain array)."""

    masked: int = 0
    size: int = 0


@record
class Outcome:
    """What one call of a candidate function did."""

    status: CallStatus | str  # a CallStatus; some checks still build outcomes from its strings
    value: Any = None  # the return value when status is OK
    error: ErrorInfo | None = None  # when status is RAISED
    mutated: tuple[str, ...] = ()  # arguments the call wrote into, e.g. ("x", "params['Wq']")
    output: str = ""  # captured stdout+stderr, truncated with a notice
    detail: str = ""  # timeout / crash / memory explanation
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)  # harness results (e.g. gradients)

    @property
    def ok(self) -> bool:
        return self.status == CallStatus.OK

    def describe_failure(self) -> str:
        if self.status == CallStatus.RAISED and self.error:
            return f"raised {self.error.one_line()}"
        if self.status == CallStatus.CRASHED:
            return f"crashed: {self.detail}"
        return self.detail or self.status
