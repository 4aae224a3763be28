"""The kit's side of the trust boundary: starts the candidate's worker (attn_kit.runtime) under
kernel limits, feeds it calls, reads its data-only replies within deadlines and bounds, decides
whether a call wrote into its arguments, and leaves nothing running.

It imports attn_kit.runtime (to launch it), attn_kit.load and attn_kit.base; never the checks,
the oracle or anything that knows an expected value.
"""
