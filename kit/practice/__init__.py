"""Practice: the candidate's session around the checks (history and progress, hints and solutions,
watch mode, timed mocks, test-tests, bench, spaced review). practice/store.py, the SQLite history, is the
bottom of this package: the other modules use it, it imports none of them.
"""
