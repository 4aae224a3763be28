"""The bottom layer, shared by both sides of the trust boundary: the kit's exceptions, where its
bundled data lives, the records that cross the process boundary and their data-only wire format,
the measuring harnesses and the torch tensor helpers, and safe writing of the kit's own files.

It imports nothing else from attn_kit: everything else may import it, including the runtime that
runs inside the candidate's process.
"""
