"""Where the kit's bundled data lives, in a checkout and in an installed wheel alike."""

import importlib
from pathlib import Path


def package_dir(name: str) -> Path:
    """The folder of one of attn_kit's bundled packages: 'prompts', 'solutions' or 'checks'.

    Plain packages on disk (the wheel is never zipped), so the package's __file__ says where;
    importlib.resources would cost more start-up time than the rest of this module.
    """
    file = importlib.import_module(f"attn_kit.{name}").__file__
    if file is None:
        raise RuntimeError(f"attn_kit.{name} is not a package on disk")
    return Path(file).parent


def schemas_dir() -> Path:
    """The JSON Schemas of the --json outputs: a data folder of attn_kit's, not a package."""
    return Path(__file__).resolve().parents[1] / "schemas"


def solutions_dir(exercise_id: str) -> Path:
    return package_dir("solutions") / exercise_id


def reference_files(exercise_id: str) -> list[Path]:
    """Reference solutions of an exercise, reference_*.py, in name order."""
    return sorted(solutions_dir(exercise_id).glob("reference_*.py"))


def bug_files(exercise_id: str) -> list[Path]:
    """Known-bug variants: bugs/<bug-id>.py, or bugs/<bug-id>@<form>.py for a second form."""
    return sorted((solutions_dir(exercise_id) / "bugs").glob("*.py"))


def bug_id_of(path: Path) -> str:
    return path.stem.split("@", 1)[0]
