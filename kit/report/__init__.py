"""Report: the plain-data records of a run (one per check, one per diagnosed bug, one per run), their
`--json` contract and the `--repro` scripts. No terminal output here (that is attn_kit.render).

It imports load and base only; the stages above it import it.
"""
