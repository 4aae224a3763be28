"""`check --locate`: where the candidate's values first go wrong, and the smallest verified edit.

First the smallest failing calls are traced (tracing.py) and the candidate's values matched to the
reference's named stages (matching.py, relations.py): the divergence lines. Then the candidate's
file is parsed with `ast`; operators that fit attention code (operators.py, a table of small
functions over one expression and its scope.py) propose small edits, ranked with those at the
divergence lines first (propose.py). Each edit is spliced into the candidate's own text (edits.py:
only the edited expression is rewritten), written to a private temporary folder, and run in the
sandbox, with the same limits as the original (verify.py, the one module that starts those runs),
against the checks the file failed: single edits first, then pairs guided by which failing checks
each single edit repaired (search.py). An edit is shown only once it is verified: the edited file
passes the whole suite on the run's seed and on a second seed. results.py holds the answer. The
candidate's file is only read, never written.

Modules, top to bottom: search; verify, results, propose; tracing; matching; relations,
operators; scope; syntax, edits (pyproject.toml's import-linter contract keeps the order).
"""

from attn_kit.grading.locate.edits import Edit, apply, diff
from attn_kit.grading.locate.propose import focused, propose
from attn_kit.grading.locate.results import Found, Located, Partial
from attn_kit.grading.locate.search import DEFAULT_BUDGET, _pairs, locate, reachable
from attn_kit.grading.locate.verify import _closer, preload_for, prepare

__all__ = [
    "DEFAULT_BUDGET",
    "Edit",
    "Found",
    "Located",
    "Partial",
    "_closer",
    "_pairs",
    "apply",
    "diff",
    "focused",
    "locate",
    "preload_for",
    "prepare",
    "propose",
    "reachable",
]
