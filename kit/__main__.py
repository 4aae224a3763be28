"""`python -m attn_kit`: the same program as the `attn-kit` command."""

from .cli import main

main()
