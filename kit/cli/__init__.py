"""The `attn-kit` command: thin click commands that parse options, call the library once per
stage (grade -> report -> record -> render) and pick the exit status. The only package that
imports click.
"""

from attn_kit.cli.app import cli, main

__all__ = ["cli", "main"]
