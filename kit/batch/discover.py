"""Finding the submissions in what students hand in: files, folders, zip archives and Gradescope's
export, and saying for each which file will be graded and why.

In a folder of submissions (docs/grading.md says the same):
- every `*.py` file is one submission, named by its stem; every `*.zip` file is one submission,
  named by its stem, read as a folder (below);
- every subfolder is one submission, named by the folder;
- names starting with `.` or `_` (`.git`, `__pycache__`, `__MACOSX`) are skipped; a symbolic link
  is reported as a missing submission (the kit does not follow links in submissions: read as the
  kit's user, one could show a file the student may not read); a linked `.py` file inside a
  submission is ignored;
- a folder holding `submission_metadata.yml` is Gradescope's export: each `submission_ID/` is one
  submission, named by its submitters' names from that file.
In one submission's folder (or extracted archive), the graded file is the first rule that picks
one (FOLDER_RULES): its only `*.py` file (tests, conftest.py and __init__.py do not count); the file
named as `attn-kit start` names it (the exercise id with underscores); `solution.py`; the one file whose first line
is `# attn-kit: ID`; the one file that defines the exercise's main function (the others are its
helpers, importable from it when graded: the worker puts the file's folder first on sys.path).
With no `*.py` file at its top, a lone zip archive or a lone folder is looked into, one level only.

An archive is extracted by the kit into its own scratch folder, refusing the whole archive (the
submission is then reported missing, with the reason) on an absolute or `..` name, a symbolic
link or other special entry, an encrypted entry, more than MAX_ENTRIES entries, or more than
MAX_BYTES in all (counted as extracted, whatever its header claims).
"""

from __future__ import annotations

import ast
import atexit
import os
import re
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from attn_kit.base.errors import ArchiveRefused as Refused
from attn_kit.base.errors import UsageError

NOT_SOLUTIONS = ("test_", "conftest.py", "__init__.py")
SKIPPED = (".", "_")
MAX_ENTRIES = 500
MAX_BYTES = 50 << 20
MAX_SOURCE = 2 << 20  # bytes of a .py file read to find its functions
GRADESCOPE_METADATA = "submission_metadata.yml"


@dataclass
class Submission:
    name: str
    path: Path | None
    problem: str = ""  # why no file was found (path is None)
    picked: str = ""  # which file is graded and why (shown in every output)


@dataclass
class Context:
    """What the rules know: the exercise (for its file name and main function), and where archives
    are extracted."""

    exercise: str | None = None
    scratch: Path | None = None

    def folder_for(self, archive: Path) -> Path:
        if self.scratch is None:
            self.scratch = Path(tempfile.mkdtemp(prefix="attn-kit-submissions-"))
            atexit.register(shutil.rmtree, self.scratch, True)
        self.scratch.chmod(0o755)  # the sandbox's worker (another uid, as root) reads the files
        folder = Path(tempfile.mkdtemp(prefix=f"{_plain(archive.stem)}-", dir=self.scratch))
        folder.chmod(0o755)
        return folder


def _plain(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60] or "archive"


# --- one submission's folder ---------------------------------------------------------------------


def _sources(folder: Path) -> list[Path]:
    """The .py files at the folder's top that could be the solution (not tests, not hidden)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [
        p
        for p in entries
        if p.suffix == ".py"
        and p.is_file()
        and not p.is_symlink()
        and not p.name.startswith((".", *NOT_SOLUTIONS))
        and not p.stem.endswith("_test")
    ]


def _first_line(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline(200).strip()
    except OSError:
        return ""


def _defines(path: Path, function: str) -> bool:
    """The file defines `function` at its top level (read as text, never run)."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(MAX_SOURCE))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function for n in tree.body)


def _main(ctx: Context) -> str | None:
    if ctx.exercise is None:
        return None
    from attn_kit.load import catalog

    try:
        return catalog.exercise(ctx.exercise).main
    except Exception:  # noqa: BLE001 - an unknown exercise is reported by the grading, not here
        return None


Pick = tuple[Path, str] | None


def _only(folder: Path, files: list[Path], ctx: Context) -> Pick:
    return (files[0], "the folder's only .py file") if len(files) == 1 else None


def _named(folder: Path, files: list[Path], ctx: Context) -> Pick:
    if ctx.exercise is None:
        return None
    name = ctx.exercise.replace("-", "_") + ".py"
    hit = [p for p in files if p.name == name]
    return (hit[0], f"named {name}, as `attn-kit start` names the exercise's file") if hit else None


def _solution(folder: Path, files: list[Path], ctx: Context) -> Pick:
    hit = [p for p in files if p.name == "solution.py"]
    return (hit[0], "solution.py, among several .py files") if hit else None


def _headed(folder: Path, files: list[Path], ctx: Context) -> Pick:
    hit = [p for p in files if _first_line(p).startswith("# attn-kit:")]
    return (hit[0], "the one .py file starting with `# attn-kit:`") if len(hit) == 1 else None


def _defining(folder: Path, files: list[Path], ctx: Context) -> Pick:
    main = _main(ctx)
    if main is None or len(files) < 2:
        return None
    hit = [p for p in files if _defines(p, main)]
    if len(hit) != 1:
        return None
    helpers = ", ".join(p.name for p in files if p != hit[0])
    return hit[0], f"the one .py file defining `{main}` (its helpers, importable from it: {helpers})"


FOLDER_RULES: tuple[Callable[[Path, list[Path], Context], Pick], ...] = (_only, _named, _solution, _headed, _defining)


def _inner(folder: Path) -> tuple[list[Path], list[Path]]:
    """The zip archives and the folders at the folder's top (not hidden, not __MACOSX)."""
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith(SKIPPED) and not p.is_symlink())
    except OSError:
        return [], []
    return [p for p in entries if p.suffix.lower() == ".zip" and p.is_file()], [p for p in entries if p.is_dir()]


def pick(folder: Path, ctx: Context, down: int = 1, unzip: int = 1) -> tuple[Path | None, str]:
    """(the file to grade, why it was picked) or (None, why none was); with no .py file at the
    top, look `down` folder levels into a lone folder, and `unzip` archives deep into a lone zip."""
    files = _sources(folder)
    for rule in FOLDER_RULES:
        found = rule(folder, files, ctx)
        if found:
            return found
    if files:
        listing = ", ".join(p.name for p in files[:4]) + (", ..." if len(files) > 4 else "")
        main = _main(ctx)
        defining = f", and not exactly one defines `{main}`" if main else ""
        return None, f"{len(files)} .py files in it ({listing}): none is solution.py or starts with `# attn-kit:`{defining}"
    archives, folders = _inner(folder)
    if unzip and len(archives) == 1 and not folders:
        path, why = from_archive(archives[0], ctx, down)
        return path, (f"in {archives[0].name}: {why}" if path else f"{archives[0].name}: {why}")
    if down and len(folders) == 1 and not archives:
        path, why = pick(folders[0], ctx, down - 1, unzip)
        return path, (f"in its only folder, {folders[0].name}/: {why}" if path else f"{folders[0].name}/: {why}")
    return None, "no .py file in it" + (f" (and {len(archives)} archives, {len(folders)} folders)" if archives or folders else "")


# --- archives ------------------------------------------------------------------------------------------


def _entry_target(info: zipfile.ZipInfo) -> PurePosixPath:
    """The entry's path inside the scratch folder; Refused if unsafe."""
    name = info.filename
    if "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise Refused(f"it names a path outside itself ({name!r})")
    parts = PurePosixPath(name).parts
    if ".." in parts:
        raise Refused(f"it names a path outside itself ({name!r})")
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0: an archiver that records no file type
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise Refused(f"it holds a link or special file ({name!r}), which the kit does not extract")
    if info.flag_bits & 0x1:
        raise Refused(f"{name!r} is encrypted")
    return PurePosixPath(*parts)


def _copy(source, target: Path, budget: list[int]) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(1 << 16):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise Refused(f"it holds more than {MAX_BYTES >> 20} MB once extracted")
            out.write(chunk)


def extract(archive: Path, into: Path) -> None:
    """Extract `archive` into the empty folder `into`; Refused (nothing kept) if it is unsafe."""
    try:
        with zipfile.ZipFile(archive) as zf:
            entries = zf.infolist()
            if len(entries) > MAX_ENTRIES:
                raise Refused(f"it holds {len(entries)} entries (at most {MAX_ENTRIES})")
            targets = [(info, _entry_target(info)) for info in entries]
            budget = [MAX_BYTES]
            for info, rel in targets:
                if not rel.parts or rel.parts[0] == "__MACOSX":
                    continue
                target = into.joinpath(*rel.parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True, mode=0o755)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
                with zf.open(info) as source:
                    _copy(source, target, budget)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, RuntimeError) as exc:
        raise Refused(f"it is not a readable zip archive ({exc})") from None
    except OSError as exc:
        raise Refused(f"it could not be extracted ({exc.strerror or exc})") from None


def from_archive(archive: Path, ctx: Context, down: int = 1) -> tuple[Path | None, str]:
    """The file to grade in a zip archive, as in a folder (one folder level down inside it, no
    archive inside it)."""
    folder = ctx.folder_for(archive)
    try:
        extract(archive, folder)
    except Refused as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"the archive was refused: {exc}"
    return pick(folder, ctx, down, unzip=0)


# --- a folder of submissions -------------------------------------------------------------------------


def _one(entry: Path, ctx: Context) -> Submission | None:
    if entry.name.startswith(SKIPPED):
        return None
    if entry.is_symlink():  # read as the kit's user, a link could show a file the student may not read
        return Submission(
            entry.stem if entry.suffix in (".py", ".zip") else entry.name,
            None,
            f"{entry.name} is a symbolic link, which the kit does not follow in submissions",
        )
    if entry.is_file() and entry.suffix == ".py":
        return Submission(entry.stem, entry, picked=f"{entry.name}: a .py file in the folder of submissions")
    if entry.is_file() and entry.suffix.lower() == ".zip":
        path, why = from_archive(entry, ctx)
        return _made(entry.stem, path, f"{entry.name}: {why}")
    if entry.is_dir():
        path, why = pick(entry, ctx)
        return _made(entry.name, path, why)
    return None


def _made(name: str, path: Path | None, why: str) -> Submission:
    return Submission(name, path, picked=f"{path.name} ({why})") if path else Submission(name, None, why)


def gradescope_names(metadata: Path) -> dict[str, str]:
    """Gradescope's export: `submission_ID` -> its submitters' names ("A, B"), from the small part
    of YAML that `submission_metadata.yml` uses (top-level keys; `:submitters:` lists of
    `- :name: ...`). Anything it does not recognise is ignored (the folder's name is kept)."""
    names: dict[str, list[str]] = {}
    key, in_submitters, indent = None, False, 0
    try:
        lines = metadata.read_text(encoding="utf-8", errors="replace").splitlines()[:200_000]
    except OSError:
        return {}
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(line.lstrip(" "))
        if depth == 0 and stripped.endswith(":"):
            key, in_submitters = stripped[:-1].strip("'\""), False
        elif key and stripped == ":submitters:":
            in_submitters, indent = True, depth
        elif in_submitters and depth <= indent and not stripped.startswith("-"):
            in_submitters = False
        elif key and in_submitters and (m := re.match(r"^(?:-\s+)?:name:\s*(.*)$", stripped)):
            names.setdefault(key, []).append(_scalar(m.group(1)))
    return {k: ", ".join(n for n in v if n) for k, v in names.items() if any(v)}


def _scalar(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1].replace("''", "'") if text[0] == "'" else text[1:-1].replace('\\"', '"')
    return text[:200]


def unique(found: list[Submission]) -> list[Submission]:
    """Every submission under its own name: when names collide (a folder `s1/` and a file
    `s1.py`), a file takes its full name (`s1.py`), and any name still taken gets `~2`, `~3`."""
    names = [s.name for s in found]
    for sub in found:
        if names.count(sub.name) > 1 and sub.path is not None and sub.path.parent.name != sub.name and sub.path.name.startswith(sub.name):
            sub.name = sub.path.name
    seen: set[str] = set()
    for sub in found:
        name, n = sub.name, 1
        while name in seen:
            n += 1
            name = f"{sub.name}~{n}"
        sub.name = name
        seen.add(name)
    return found


def _cohort(root: Path, ctx: Context) -> list[Submission]:
    found = [s for entry in sorted(root.iterdir()) if (s := _one(entry, ctx))]
    metadata = root / GRADESCOPE_METADATA
    if metadata.is_file():
        names = gradescope_names(metadata)
        for sub in found:
            if sub.name in names:
                where = f"{sub.name}/ of Gradescope's export (names from {GRADESCOPE_METADATA})"
                if sub.path:
                    sub.picked = f"{where}: {sub.picked}"
                else:
                    sub.problem = f"{where}: {sub.problem}"
                sub.name = names[sub.name]
    return found


def _root_archive(root: Path, ctx: Context, single: bool) -> list[Submission]:
    """A zip given as SUBMISSIONS: Gradescope's export (or any folder of submissions) when it holds
    submission_metadata.yml, at its top or in its only folder; else one submission."""
    folder = ctx.folder_for(root)
    try:
        extract(root, folder)
    except Refused as exc:
        return [Submission(root.stem, None, f"{root.name}: the archive was refused: {exc}")]
    _, folders = _inner(folder)
    for top in (folder, *folders[:1]):
        if not single and (top / GRADESCOPE_METADATA).is_file():
            return unique(_cohort(top, ctx))
    path, why = pick(folder, ctx, unzip=0)
    return [_made(root.stem, path, f"{root.name}: {why}")]


def find_submissions(root: Path, single: bool = False, exercise: str | None = None, scratch: Path | None = None) -> list[Submission]:
    """The submissions under `root` (see the module's docstring), in name order. `exercise` lets
    the rules find its file among helpers; archives are extracted under `scratch` (default: a
    temporary folder removed when the kit exits)."""
    root = Path(root)
    ctx = Context(exercise, scratch)
    if not root.exists():
        raise UsageError(f"{root} does not exist; give the folder of submissions (or one submission's file).")
    if root.is_file() and root.suffix.lower() == ".zip":
        return _root_archive(root, ctx, single)
    if root.is_file():
        return [Submission(root.stem, root, picked=f"{root.name}: the file given")]
    if single:
        path, why = pick(root, ctx)
        return [_made(root.resolve().name or "submission", path, why)]
    found = _cohort(root, ctx)
    if not found:
        raise UsageError(
            f"{root} holds no submission: put one .py file (or .zip) per submission in it, or one folder per submission holding its file."
        )
    return unique(found)
