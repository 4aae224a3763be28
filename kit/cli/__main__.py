"""`python -m attn_kit.cli`: the `attn-kit` command, as `python -m attn_kit` runs it."""

from attn_kit.cli.app import main

main()
