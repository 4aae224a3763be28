"""Everything that runs INSIDE the candidate's process: the worker loop that loads the solution
and answers calls, and the harnesses for `bench` and `test-tests`. Code here is on the untrusted
side of the boundary: it imports only attn_kit.base and never sees an expected value.

Nothing in the kit imports it except the sandbox's launcher (attn_kit.sandbox), which starts it.
"""
