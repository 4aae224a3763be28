"""Compare: turning the candidate's returned values into arrays and comparing them with the kit's
oracle within a tolerance; the check API (@check, Suite, CheckContext) the graded suite in
attn_kit.checks is written against; and the oracle run in the kit's own process.

It imports report and base; the float32 answer of the oracle is handed in by the pipeline, so
nothing here imports the diagnosis above it.
"""
