"""The kit's domain exceptions. Only cli.py turns them into `Error: ...` and an exit status."""


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
