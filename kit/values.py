"""Small records that cross the process boundary between the kit and the candidate's worker.

Only the standard library here: the worker imports this module, and so does the kit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ErrorInfo:
    """An exception raised by the candidate's code, with the candidate's own frames only."""

    type: str
    message: str
    where: str = ""          # "solution.py:12 in multi_head_attention"
    traceback: str = ""      # the candidate's frames, formatted

    def one_line(self) -> str:
        text = f"{self.type}: {self.message}" if self.message else self.type
        return f"{text} (at {self.where})" if self.where else text


@dataclass(frozen=True)
class TensorValue:
    """A torch tensor returned by the candidate, as data plus the attributes checks look at."""

    array: Any               # numpy array with the tensor's values (detached, on the CPU)
    dtype: str               # "torch.float32"
    device: str              # "cpu", "meta"
    shape: tuple[int, ...]
    requires_grad: bool = False


@dataclass(frozen=True)
class Opaque:
    """A returned object that could not be sent back (not an array, list or number)."""

    type_name: str
    text: str = ""


@dataclass(frozen=True)
class Outcome:
    """What one call of a candidate function did."""

    status: str                       # ok | raised | timeout | crashed | memory
    value: Any = None                 # the return value when status == "ok"
    error: ErrorInfo | None = None    # when status == "raised"
    mutated: tuple[str, ...] = ()     # arguments the call wrote into, e.g. ("x", "params['Wq']")
    output: str = ""                  # captured stdout+stderr, truncated with a notice
    detail: str = ""                  # timeout / crash / memory explanation
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)   # harness results (e.g. gradients)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe_failure(self) -> str:
        if self.status == "raised" and self.error:
            return f"raised {self.error.one_line()}"
        if self.status == "crashed":
            return f"crashed: {self.detail}"
        return self.detail or self.status
