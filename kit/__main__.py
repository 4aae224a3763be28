"""`python -m attn_kit`: the same program as the `attn-kit` command.

Under `-m` the current folder is first on sys.path; the package's __init__ takes it off while `-m`
is still importing the package, before anything a planted `click.py` or `numpy.py` could shadow."""

from attn_kit.cli.app import main

main()
