"""The other half of tests/corpus/families/ (see test_diagnosis_families.py): a module of its own so
that pytest-xdist's loadfile grades the two halves on two cores."""

from __future__ import annotations

import pytest
from test_diagnosis_families import cases, check_file


@pytest.mark.parametrize("name", cases(1))
def test_family_variant_is_named(name):
    check_file(name)
