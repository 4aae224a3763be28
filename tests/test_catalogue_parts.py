"""An exercise's own part of the catalogue (prompts/catalogue/<id>.toml) and the shared files.

The loaders merge each exercise's own bugs, families and features after prompts/bugs.toml,
families.toml and coverage.toml. Folding an own file back into the shared files (as mla-decode's
entries were before they moved) loads the same catalogue; `dev check` rejects a definition made
in two places, and docs/catalogue.md (every exercise's ids with their titles) when it is stale.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attn_kit.base.errors import UsageError
from attn_kit.base.paths import package_dir
from attn_kit.dev import check as devcheck
from attn_kit.diagnosis import compose
from attn_kit.load import catalog

OWN = "mla-decode"  # the exercise whose own entries moved out of the shared files


def _value(value) -> str:
    """A TOML value: strings, lists of them and lists of lists (a family's edits), inline tables."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def _table(name: str, entry: dict) -> str:
    return f"\n[[{name}]]\n" + "".join(f"{k} = {_value(v)}\n" for k, v in entry.items())


def _fold(prompts) -> None:
    """Move every own file's entries into the shared files, as they were written before."""
    for path in catalog.own_catalogue_files(prompts):
        own = catalog.load_own_catalogue(path)
        with open(prompts / "bugs.toml", "a", encoding="utf-8") as fh:
            for bug in own.bugs.values():
                fh.write(_table("bugs", {k: v for k, v in vars(bug).items() if v != ""}))
        with open(prompts / compose.FAMILIES, "a", encoding="utf-8") as fh:
            fh.write("".join(_table("family", entry) for entry in own.families))
        coverage = (prompts / "coverage.toml").read_text(encoding="utf-8")
        if own.features is not None:
            coverage = coverage.replace("\n[needs]\n", f"\n{own.exercise} = {_value(list(own.features))}\n\n[needs]\n", 1)
        coverage += "".join(f"{bug_id} = {_value([own.exercise])}\n" for bug_id in own.bugs)
        (prompts / "coverage.toml").write_text(coverage, encoding="utf-8")
        path.unlink()


def _loaded(prompts) -> tuple:
    features, needs = catalog.load_coverage(prompts)
    families = compose.read_families(prompts / compose.FAMILIES) + catalog.own_families(prompts)
    return list(catalog.load_catalogue_bugs(prompts).items()), features, dict(needs), list(families)


def test_mla_decode_s_entries_live_in_its_own_file():
    own = catalog.load_own_catalogue(package_dir("prompts") / catalog.OWN_DIR / f"{OWN}.toml")
    assert own.features == ("scores", "softmax") and len(own.bugs) == 8 and len(own.families) == 2
    shared = (package_dir("prompts") / "bugs.toml").read_text(encoding="utf-8")
    assert not any(f'id = "{bug_id}"' in shared for bug_id in own.bugs)
    assert OWN not in (package_dir("prompts") / compose.FAMILIES).read_text(encoding="utf-8")
    assert set(own.bugs) <= set(catalog.bugs()) and set(catalog.exercise(OWN).bug_ids) >= set(own.bugs)


def test_own_files_load_as_if_written_in_the_shared_files(tmp_path):
    prompts = shutil.copytree(package_dir("prompts"), tmp_path / "prompts", ignore=shutil.ignore_patterns("__pycache__"))
    split = _loaded(prompts)
    _fold(prompts)
    assert not catalog.own_catalogue_files(prompts)
    assert _loaded(prompts) == split
    ids = [b for b, _ in split[0]]
    own_ids = list(catalog.load_own_catalogue(package_dir("prompts") / "catalogue" / f"{OWN}.toml").bugs)
    start = ids.index(own_ids[0])
    assert ids[start : start + len(own_ids)] == own_ids  # an own file's bugs load together, in its order


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> devcheck.Content:
    """One copy of the bundled content, checked once: it passes, so what `dev check` finds in a
    test's copy (a copy of this one) comes from that test's edit."""
    ignore = shutil.ignore_patterns("__pycache__")
    root = tmp_path_factory.mktemp("pristine")
    prompts = shutil.copytree(package_dir("prompts"), root / "prompts", ignore=ignore)
    solutions = shutil.copytree(package_dir("solutions"), root / "solutions", ignore=ignore)
    content = devcheck.Content(prompts, solutions)
    result = devcheck.run(content)
    assert result.ok, "the untouched copy fails dev check:\n" + "\n".join(map(str, result.problems))
    return content


@pytest.fixture
def copy(tmp_path, pristine) -> devcheck.Content:
    ignore = shutil.ignore_patterns("__pycache__")  # what checking the pristine copy may have compiled
    prompts = shutil.copytree(pristine.prompts, tmp_path / "prompts", ignore=ignore)
    solutions = shutil.copytree(pristine.solutions, tmp_path / "solutions", ignore=ignore)
    return devcheck.Content(prompts, solutions)


def _edit(path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _own_entry(content: devcheck.Content, header: str) -> str:
    """The text of the first `[[header]]` table of mla-decode's own file, to copy elsewhere."""
    text = (content.prompts / "catalogue" / f"{OWN}.toml").read_text(encoding="utf-8")
    return "\n" + header + text.split(header, 2)[1].split("\n\n")[0] + "\n"


BREAKAGES = {
    "an own bug also in bugs.toml": (
        lambda c: (c.prompts / "bugs.toml").open("a", encoding="utf-8").write(_own_entry(c, "[[bugs]]")),
        ("prompts/catalogue/mla-decode.toml: bug id 'rope-on-latent' is also defined in bugs.toml", "is declared twice"),
    ),
    "features declared in both places": (
        lambda c: _edit(c.prompts / "coverage.toml", "\n[needs]\n", '\nmla-decode = ["scores", "softmax"]\n\n[needs]\n'),
        ("prompts/catalogue/mla-decode.toml: the features of 'mla-decode' are also declared in coverage.toml",),
    ),
    "an own bug with a [needs] entry too": (
        lambda c: (c.prompts / "coverage.toml").open("a", encoding="utf-8").write('rope-on-latent = ["mla-decode"]\n'),
        ("prompts/catalogue/mla-decode.toml: 'rope-on-latent' also has an entry in coverage.toml [needs]",),
    ),
    "another exercise's family": (
        lambda c: _edit(
            c.prompts / "catalogue" / f"{OWN}.toml", 'form = "mla-scale-wrong-width"', 'exercise = "rope"\nform = "mla-scale-wrong-width"'
        ),
        ("prompts/catalogue/mla-decode.toml: [[family]] #1: exercise = 'rope' is another exercise's",),
    ),
    "a concept's words in both places": (
        lambda c: (c.prompts / "catalogue" / f"{OWN}.toml").open("a", encoding="utf-8").write("\n[concept_words]\nscaling = 'sqrt'\n"),
        ("prompts/catalogue/mla-decode.toml: [concept_words] scaling is also defined in prompts/concepts.toml",),
    ),
    "words for a bug of another exercise": (
        lambda c: (c.prompts / "catalogue" / f"{OWN}.toml").open("a", encoding="utf-8").write("\n[bug_words]\nno-scaling = 'sqrt'\n"),
        ("prompts/catalogue/mla-decode.toml: [bug_words] no-scaling is not one of this exercise's own bugs",),
    ),
    "a file for no exercise": (
        lambda c: (c.prompts / "catalogue" / "no-such-exercise.toml").write_text("format = 1\n", encoding="utf-8"),
        ("prompts/catalogue/no-such-exercise.toml: unexpected in prompts/catalogue/",),
    ),
    "an own family that no longer fits": (
        lambda c: _edit(c.prompts / "catalogue" / f"{OWN}.toml", '[["np.sqrt(d_nope)"', '[["np.sqrt(d_nope_)"'),
        ("prompts/catalogue/mla-decode.toml: families.toml: mla-scale-wrong-width",),
    ),
}


@pytest.mark.parametrize("name", BREAKAGES)
def test_dev_check_rejects_a_definition_made_in_two_places(copy, name):
    breakage, expected = BREAKAGES[name]  # the untouched copy passes (pristine): each problem comes from the edit
    broken = devcheck.Content(copy.prompts, copy.solutions)
    breakage(broken)
    found = [str(p) for p in devcheck.run(broken).problems]
    for said in expected:
        assert any(said in p for p in found), f"{said!r} not in:\n" + "\n".join(found)
    assert len(found) <= 2, "one problem per breakage (two for a bug id: the merge and the id rule):\n" + "\n".join(found)


def test_dev_check_fails_a_stale_catalogue_doc(copy):
    root = copy.prompts.parent
    shutil.copy(Path(__file__).resolve().parents[1] / "README.md", root / "README.md")
    (root / "docs").mkdir()
    doc = root / "docs" / "catalogue.md"
    doc.write_text(devcheck.catalogue_text(copy) or "", encoding="utf-8")
    assert devcheck.run(copy, [devcheck.readme_tables_are_up_to_date]).ok
    _edit(copy.prompts / "catalogue" / f"{OWN}.toml", 'title = "The latent is rotated by RoPE"', 'title = "The latent is rotated"')
    fresh = devcheck.Content(copy.prompts, copy.solutions)
    found = [str(p) for p in devcheck.run(fresh, [devcheck.readme_tables_are_up_to_date]).problems]
    assert found == ["docs/catalogue.md: out of date (the known bugs of each exercise): run attn-kit dev update"]
    assert devcheck.update_catalogue_doc(fresh) and "| `rope-on-latent` | The latent is rotated |" in doc.read_text(encoding="utf-8")
    assert devcheck.run(fresh, [devcheck.readme_tables_are_up_to_date]).ok


# --- `attn-kit dev split`: an exercise's blocks at the end of the shared files, moved to its own ---


def _as_blocks(prompts, exercise_id: str) -> None:
    """Write an exercise's own entries as they were before own files: a `# --- <id> ---` block at
    the end of each shared file (its features line in coverage.toml's block, which lies in [needs])."""
    own = catalog.load_own_catalogue(prompts / catalog.OWN_DIR / f"{exercise_id}.toml")
    header = f"\n# --- {exercise_id} ---------------------------------------------\n"
    with open(prompts / "bugs.toml", "a", encoding="utf-8") as fh:
        fh.write(header + "".join(_table("bugs", {k: v for k, v in vars(bug).items() if v != ""}) for bug in own.bugs.values()))
    with open(prompts / compose.FAMILIES, "a", encoding="utf-8") as fh:
        fh.write(header + "".join(_table("family", entry) for entry in own.families))
    lines = [f"{exercise_id} = {_value(list(own.features or ()))}"] + [f"{b} = {_value([exercise_id])}" for b in own.bugs]
    with open(prompts / "coverage.toml", "a", encoding="utf-8") as fh:
        fh.write(header + "\n".join(lines) + "\n")
    (prompts / catalog.OWN_DIR / f"{exercise_id}.toml").unlink()


def test_dev_split_moves_an_exercise_s_blocks_into_its_own_file(copy):
    from attn_kit.dev import split

    original = {p.name: p.read_text(encoding="utf-8") for p in copy.prompts.glob("*.toml")}
    _as_blocks(copy.prompts, OWN)
    moved = split.split(copy.prompts, OWN)
    assert moved.features == ("scores", "softmax") and len(moved.bugs) == 8 and moved.families == 2
    assert {p.name: p.read_text(encoding="utf-8") for p in copy.prompts.glob("*.toml")} == original
    assert _loaded(copy.prompts)[:3] == _loaded(package_dir("prompts"))[:3]
    result = devcheck.run(devcheck.Content(copy.prompts, copy.solutions))
    assert result.ok, "\n".join(map(str, result.problems))
    with pytest.raises(UsageError, match="no '# --- mla-decode ---' block"):
        split.split(copy.prompts, OWN)


def test_dev_split_refuses_a_block_with_a_shared_bug(copy):
    from attn_kit.dev import split

    _as_blocks(copy.prompts, OWN)
    coverage = copy.prompts / "coverage.toml"
    _edit(coverage, 'rope-on-latent = ["mla-decode"]', 'rope-on-latent = ["scores"]')
    before = {p.name: p.read_bytes() for p in copy.prompts.rglob("*.toml")}
    with pytest.raises(UsageError, match="'rope-on-latent' the needs \\['scores'\\]: a bug other exercises can make"):
        split.split(copy.prompts, OWN)
    assert {p.name: p.read_bytes() for p in copy.prompts.rglob("*.toml")} == before, "a refused split writes nothing"


def test_dev_split_puts_every_file_back_when_the_catalogue_would_change(copy):
    from attn_kit.dev import split

    _as_blocks(copy.prompts, OWN)
    _edit(copy.prompts / "coverage.toml", "\n[needs]\n", '\nmla-decode = ["scores"]\n\n[needs]\n')  # features twice
    before = {p.relative_to(copy.prompts).as_posix(): p.read_bytes() for p in copy.prompts.rglob("*.toml")}
    with pytest.raises(UsageError, match="would change the catalogue as loaded: nothing was moved"):
        split.split(copy.prompts, OWN)
    assert {p.relative_to(copy.prompts).as_posix(): p.read_bytes() for p in copy.prompts.rglob("*.toml")} == before


def test_the_dev_split_command(copy, monkeypatch):
    from click.testing import CliRunner

    from attn_kit.base import paths
    from attn_kit.cli.app import cli

    _as_blocks(copy.prompts, OWN)
    monkeypatch.setattr(paths, "package_dir", lambda name: copy.prompts if name == "prompts" else package_dir(name))
    result = CliRunner().invoke(cli, ["dev", "split", OWN])
    assert (result.exit_code, result.output) == (
        0,
        f"✓ prompts/catalogue/{OWN}.toml: its features, 8 bug(s) and 2 family entries moved there\n",
    )
    again = CliRunner().invoke(cli, ["dev", "split", OWN])
    assert again.exit_code == 2 and "nothing to move" in again.output and "Traceback" not in again.output


def test_an_exercise_s_own_words_join_prompts_concepts_toml(copy):
    """A concept an exercise introduces and its own bugs' words sit in its own file too."""
    own = copy.prompts / "catalogue" / f"{OWN}.toml"
    own.write_text(
        own.read_text(encoding="utf-8") + "\n[concept_words]\nlatent-cache = 'latent'\n\n[bug_words]\nrope-on-latent = 'latent'\n",
        encoding="utf-8",
    )
    concepts, bugs = devcheck.concept_words(copy)
    assert concepts["latent-cache"] == "latent" and concepts["scaling"] == "sqrt|scal" and bugs["rope-on-latent"] == "latent"
    result = devcheck.run(copy)
    assert result.ok, "\n".join(map(str, result.problems))
