"""The kit's domain exceptions, all of them. Only the CLI turns them into `Error: ...` and an exit status."""


class KitError(Exception):
    """Something the user can fix; the message says what to do next."""

    exit_code = 1


class UsageError(KitError):
    """The command was misused: no such file, unknown exercise, bad option."""

    exit_code = 2


class CatalogError(KitError):
    """A data file under prompts/ or solutions/ is malformed (a bug in the kit, not the user's)."""

    exit_code = 2


class LoadError(KitError):
    """The candidate's file cannot be graded at all: syntax error, missing function, crash on import."""

    exit_code = 1


class DependencyMissing(KitError):
    """An optional dependency (torch) is needed for this exercise and is not installed."""

    exit_code = 1


class StoreError(KitError):
    """The history database cannot be opened or written (disk full, permissions, locked too long)."""

    exit_code = 1


class SolutionLocked(KitError):
    """The reference solution is shown only after a pass or once every hint has been used."""

    exit_code = 1


class BenchError(KitError):
    """The solution could not be measured at all (it fails, hangs or runs out of memory at once)."""

    exit_code = 1
