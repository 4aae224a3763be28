"""The @check decorator, the Suite that collects checks, and the CheckContext a check uses.

A check calls the candidate through the sandbox (`ctx.call`), computes expected values in the
kit's own process (`ctx.oracle`), and states its verdict with `ctx.expect_*` or `ctx.fail`.
Checks never print.
"""

from __future__ import annotations

import zlib
from dataclasses import field
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Sequence

import numpy as np

from attn_kit.base.errors import CallFailed, CheckFailed, ValueProblem
from attn_kit.base.errors import CheckSkipped as CheckSkipped  # the checks modules import it from here
from attn_kit.base.records import Outcome
from attn_kit.base.recordtype import record
from attn_kit.compare.arrays import ATOL, RTOL, check_shape, compare, float32_like, float32_values, to_array, within_float32
from attn_kit.report.results import Call, Mismatch

if TYPE_CHECKING:
    from types import ModuleType

    from numpy.typing import ArrayLike

    from attn_kit.load.preflight import SourceFile
    from attn_kit.sandbox.session import Sandbox


CheckFunction = Callable[["CheckContext"], None]  # a check: fn(ctx), which fails by raising


@record
class Relaxation:
    """A simpler shape that code which raises on the general one may support, such as "Dv = D":
    `said` in words, and `dims`, which maps a case's dimensions (a dict of the names the
    exercise's case builders use) to the relaxed ones; names a dict lacks are left out."""

    said: str
    dims: Callable[[dict[str, Any]], dict[str, Any]]


def equal(first: str, *others: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The relaxation's dims that make every name in `others` equal to `first` (where both are given)."""

    def relax(dims: dict[str, Any]) -> dict[str, Any]:
        if first not in dims:
            return dict(dims)
        return {**dims, **{name: dims[first] for name in others if name in dims}}

    return relax


def both(*steps: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Relaxations' dims applied one after the other."""

    def relax(dims: dict[str, Any]) -> dict[str, Any]:
        for step in steps:
            dims = step(dims)
        return dims

    return relax


@record
class Check:
    id: str
    title: str
    explanation: str
    func: CheckFunction
    points: int
    catches: tuple[str, ...]
    public: bool
    after: tuple[str, ...]
    hint: int | None
    concept: str
    relaxable: bool = True  # may be judged again at a shape the code supports (not when the shape is its property)


@record(frozen=False)
class Suite:
    exercise: str
    checks: list[Check] = field(default_factory=list)
    bench_inputs: Callable | None = None  # (rng, T, **dims) -> (args, kwargs), set by @SUITE.for_bench
    # simpler shapes, tried in order, at which a check whose call raised is judged again
    # (kit/grading/relax.py); the case builders apply the one in force through ctx.dims
    relaxations: tuple[Relaxation, ...] = ()

    def check(
        self,
        points: int = 1,
        catches: tuple[str, ...] = (),
        public: bool = False,
        after: tuple[str, ...] = (),
        hint: int | None = None,
        concept: str = "",
        relaxable: bool = True,
    ) -> Callable[[CheckFunction], CheckFunction]:
        """Register a check; its id is the function name with dashes, its title the docstring's
        first line and its explanation the rest. `relaxable=False`: the check's property is its
        general shape (or widths it names), so it is never judged again at a simpler one."""

        def register(func: CheckFunction) -> CheckFunction:
            doc = (func.__doc__ or func.__name__).strip().splitlines()
            check_id = func.__name__.replace("_", "-")
            if any(c.id == check_id for c in self.checks):
                raise ValueError(f"duplicate check id {check_id}")
            self.checks.append(
                Check(
                    check_id,
                    doc[0].strip(),
                    " ".join(line.strip() for line in doc[1:]).strip(),
                    func,
                    points,
                    tuple(catches),
                    public,
                    tuple(after),
                    hint,
                    concept,
                    relaxable,
                )
            )
            return func

        return register

    def for_bench(self, build: Callable) -> Callable:
        """Register the builder of `attn-kit bench`'s inputs: build(rng, T, **dims) -> (args, kwargs)."""
        self.bench_inputs = build
        return build


class CheckContext:
    def __init__(
        self,
        sandbox: Sandbox,
        oracle: ModuleType,
        seed: int,
        check: Check,
        rng_extra: str = "",
        source: SourceFile | None = None,
        float32_reference: Callable[..., Any] | None = None,
        relaxation: Relaxation | None = None,
    ):
        self.sandbox = sandbox
        self.relaxation = relaxation  # the simpler shape this run is judged at (None: the check's own)
        # (oracle, call, expected) -> the oracle's answer computed in float32, or None: given by the
        # pipeline (diagnose.float32_reference), so that the check API stays below the diagnosis
        self.float32_reference = float32_reference
        self.source = source  # loader.SourceFile of the candidate's file (imports, header)
        self.oracle = oracle
        self.seed = seed
        self.check = check
        self.rng = np.random.default_rng([seed, zlib.crc32((check.id + rng_extra).encode())])
        self.calls: list[Call] = []
        self.case: dict = {"seed": seed}
        self.notes: list[str] = []
        self.failing_call: Call | None = None
        self.float32 = 0.0  # largest |Δ| accepted as float32 rounding (0: none)

    # --- calling the candidate -------------------------------------------------------------
    def outcome(
        self,
        fn: str,
        *args: Any,
        harness: str | None = None,
        memory_limit: int | None = None,
        time_limit: float | None = None,
        **kwargs: Any,
    ) -> Outcome:
        """Run the candidate's fn and return the raw Outcome (raised, timeout, ... included).
        `memory_limit`: bytes the call may add, enforced by the kernel (Sandbox.call); `time_limit`
        replaces the call's usual limit (--timeout) for this one call."""
        outcome = self.sandbox.call(fn, args, kwargs, harness=harness, timeout=time_limit, memory_limit=memory_limit)
        self.calls.append(Call(fn, args, kwargs, outcome, harness=harness))
        return outcome

    def call(self, fn: str, *args: Any, harness: str | None = None, **kwargs: Any) -> Any:
        """Run the candidate's fn; return its value, or stop the check with status 'error'."""
        outcome = self.outcome(fn, *args, harness=harness, **kwargs)
        if not outcome.ok:
            self.failing_call = self.calls[-1]
            raise CallFailed(self.calls[-1])
        return outcome.value

    def record_for_diagnosis(
        self,
        fn: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        outcome: Outcome,
        *,
        replay: Callable[..., Any] | None = None,
        instead_of: Sequence[Call] = (),
    ) -> Call:
        """Record for the diagnosis a call that sums up what the candidate's `fn` did, in place of
        the calls `instead_of` (calls this check made, which leave the record).

        The diagnosis reruns it on each known-bug and reference module as
        `replay(module, *args, **kwargs)`: a kit-side function beside the check (it never reaches
        the worker), so solution files need no helper that exists only for the diagnosis. Without
        `replay` it calls the module's own `fn`."""
        dropped = {id(c) for c in instead_of}
        self.calls[:] = [c for c in self.calls if id(c) not in dropped]
        call = Call(fn, tuple(args), dict(kwargs), outcome, replay=replay)
        self.calls.append(call)
        return call

    @property
    def last_call(self) -> Call:
        return self.calls[-1]

    def dims(self, **dims: Any) -> dict[str, Any]:
        """A case's dimensions as this run builds them: the relaxation in force applied, if any."""
        return dims if self.relaxation is None else self.relaxation.dims(dims)

    # --- stating the verdict ---------------------------------------------------------------
    def describe(self, **facts: Any) -> None:
        """Record the case (shapes, seed, inputs that matter) for the failure evidence; under a
        relaxation the dimensions it names are the relaxed ones."""
        self.case.update(self.dims(**facts))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def fail(self, message: str, mismatch: Mismatch | None = None) -> NoReturn:
        if self.failing_call is None and self.calls:
            self.failing_call = self.calls[-1]
        raise CheckFailed(message, mismatch)

    def array(self, value: object, what: str, shape: tuple[int, ...] | None = None, dims: str = "", kind: str = "float") -> np.ndarray:
        """The value as an array with exactly this shape, or the check fails saying why."""
        try:
            arr = to_array(value, what, kind)
            if shape is not None:
                check_shape(arr, shape, what, dims)
        except ValueProblem as exc:
            self.fail(str(exc))
        return arr

    def expect_close(
        self,
        value: object,
        expected: ArrayLike,
        what: str,
        axes: tuple[str, ...] = (),
        dims: str = "",
        rtol: float = RTOL,
        atol: float = ATOL,
        kind: str = "float",
        call: Call | None = None,
        float32_ok: bool = True,
    ) -> np.ndarray:
        """Shape first, then values: fail with the worst row when they differ.

        A float32 solution's values pass when every difference is within float32 rounding of the
        reference (float32_ok=False holds them to the float64 tolerance, e.g. gradients)."""
        expected = np.asarray(expected)
        if call is None and self.calls and self.calls[-1].expected is None:
            call = self.calls[-1]
        if call is not None and call.expected is None:
            call.expected = expected
        if call is not None:  # diagnosis compares this call at least as tightly
            old_rtol, old_atol = call.tolerance or (rtol, atol)
            call.tolerance = (min(rtol, old_rtol), min(atol, old_atol))
        actual = self.array(value, what, expected.shape, dims, kind)
        mismatch = compare(actual, expected, what, axes, rtol, atol)
        if (
            mismatch is not None
            and float32_ok
            and kind == "float"
            and rtol > 0
            and self._float32_rounding(actual, expected, call, rtol, atol)
        ):
            mismatch = None
        if mismatch is not None:
            if call is not None:
                self.failing_call = call
            self.fail(mismatch.summary(), mismatch)
        return actual

    def _float32_rounding(self, actual: np.ndarray, expected: np.ndarray, call: Call | None, rtol: float, atol: float) -> bool:
        """A float32 solution whose every difference is within float32 rounding of the reference."""
        parts = call.outcome.value if call is not None and isinstance(call.outcome.value, (tuple, list)) else ()
        if not (float32_like(actual, expected) or any(float32_values(p) for p in parts[:4])):
            return False
        ref32 = None
        if call is not None and self.float32_reference is not None:  # the oracle, run in float32 on the same call
            ref32 = self.float32_reference(self.oracle, call, expected)
        ok, worst = within_float32(actual, np.asarray(expected, float), ref32, rtol, atol)
        if ok:
            self.float32 = max(self.float32, worst)
        return ok

    def expect(self, condition: bool, message: str) -> None:
        if not condition:
            self.fail(message)
