"""A test straight from the statement: `==` against a list. Right for list-returning code; on the
NumPy reference the comparison gives an array, and `assert` on it raises (ambiguous truth value)."""

from solution import stable_softmax


def test_all_blocked_is_zero():
    assert stable_softmax([3.0, 4.0], allowed=[False, False]) == [0.0, 0.0]


def test_sums_to_one():
    out = stable_softmax([1.0, 2.0, 3.0])
    assert abs(sum(out) - 1) < 1e-9
