"""Load: the exercise catalogue read from prompts/*.toml, which bugs apply where, and the pre-flight of
a candidate's file (parsed, never run, in the kit's process). It imports only attn_kit.base.
"""
