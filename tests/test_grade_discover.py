"""Discovery as students hand work in: the exercise file beside its helpers, one folder level down,
zip archives (and hostile ones), Gradescope's export with its metadata; and that the choice and
its reason reach the outputs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.batch import discover

from helpers import strict_json

EXERCISE = "mha-screen"
REFERENCE = (solutions_dir(EXERCISE) / "reference_numpy.py").read_text(encoding="utf-8")
BUGGY = (solutions_dir(EXERCISE) / "bugs" / "no-scaling.py").read_text(encoding="utf-8")
# the exercise file needs its helper: it fails to load unless the helper is importable
WITH_HELPER = "from attn_helpers import HELPED\nassert HELPED\n" + REFERENCE
HELPER = "HELPED = True\n"


def find(root: Path, tmp_path: Path, **kw) -> dict[str, discover.Submission]:
    subs = discover.find_submissions(root, exercise=EXERCISE, scratch=tmp_path / "scratch", **kw)
    return {s.name: s for s in subs}


def make_zip(path: Path, files: dict[str, bytes | str], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


@pytest.fixture
def scratch(tmp_path):
    (tmp_path / "scratch").mkdir()
    return tmp_path


def test_the_exercise_file_is_found_beside_its_helpers(scratch):
    root = scratch / "subs"
    (root / "alice").mkdir(parents=True)
    (root / "alice" / "attention.py").write_text(WITH_HELPER)
    (root / "alice" / "attn_helpers.py").write_text(HELPER)
    (root / "alice" / "test_attention.py").write_text("def test_x():\n    pass\n")
    alice = find(root, scratch)["alice"]
    assert alice.path == root / "alice" / "attention.py"
    assert "defining `multi_head_attention`" in alice.picked and "attn_helpers.py" in alice.picked
    (root / "alice" / "mha_screen.py").write_text(REFERENCE)
    assert find(root, scratch)["alice"].path.name == "mha_screen.py", "the file named as `attn-kit start` names it wins"


def test_two_files_defining_the_function_are_not_guessed_between(scratch):
    root = scratch / "subs"
    (root / "bob").mkdir(parents=True)
    (root / "bob" / "a.py").write_text(REFERENCE)
    (root / "bob" / "b.py").write_text(BUGGY)
    bob = find(root, scratch)["bob"]
    assert bob.path is None and "not exactly one defines `multi_head_attention`" in bob.problem


def test_one_folder_level_down_and_no_further(scratch):
    root = scratch / "subs"
    (root / "carol" / "hw3").mkdir(parents=True)
    (root / "carol" / "hw3" / "solution.py").write_text(REFERENCE)
    (root / "dave" / "a" / "b").mkdir(parents=True)
    (root / "dave" / "a" / "b" / "solution.py").write_text(REFERENCE)
    found = find(root, scratch)
    assert found["carol"].path == root / "carol" / "hw3" / "solution.py" and "hw3/" in found["carol"].picked
    assert found["dave"].path is None and "no .py file" in found["dave"].problem


def test_zip_archives_are_read_as_folders(scratch):
    root = scratch / "subs"
    root.mkdir()
    make_zip(root / "erin.zip", {"mha_screen.py": WITH_HELPER, "attn_helpers.py": HELPER, "__MACOSX/._mha_screen.py": b"\x00"})
    (root / "frank").mkdir()
    make_zip(root / "frank" / "upload.zip", {"project/solution.py": REFERENCE})
    found = find(root, scratch)
    assert found["erin"].path.name == "mha_screen.py" and found["erin"].path.is_relative_to(scratch / "scratch")
    assert (found["erin"].path.parent / "attn_helpers.py").is_file(), "helpers are extracted beside the file"
    assert not (found["erin"].path.parent / "__MACOSX").exists()
    assert found["frank"].path.name == "solution.py" and "upload.zip" in found["frank"].picked and "project/" in found["frank"].picked
    make_zip(root / "grace.zip", {"inner.zip": make_zip(scratch / "inner.zip", {"solution.py": REFERENCE}).read_bytes()})
    grace = find(root, scratch)["grace"]
    assert grace.path is None, "no archive inside an archive"


@pytest.mark.parametrize(
    "files,links,why",
    [
        ({"../escaped.py": REFERENCE}, None, "outside itself"),
        ({"/tmp/absolute.py": REFERENCE}, None, "outside itself"),
        ({"a\\..\\..\\x.py": REFERENCE}, None, "outside itself"),
        ({"solution.py": REFERENCE}, {"link.py": "/etc/passwd"}, "link or special file"),
        ({"solution.py": REFERENCE, "big.bin": b"\x00" * (discover.MAX_BYTES + 1)}, None, "MB once extracted"),
        ({f"f{i}.txt": "" for i in range(discover.MAX_ENTRIES + 1)}, None, "entries"),
    ],
    ids=["dotdot", "absolute", "backslash", "symlink", "bomb", "count"],
)
def test_a_hostile_archive_is_refused_and_nothing_leaves_the_scratch_folder(scratch, files, links, why):
    root = scratch / "subs"
    root.mkdir()
    make_zip(root / "mallory.zip", files, links)
    mallory = find(root, scratch)["mallory"]
    assert mallory.path is None and "refused" in mallory.problem and why in mallory.problem
    assert not (scratch / "escaped.py").exists() and not Path("/tmp/absolute.py").exists()
    assert list((scratch / "scratch").rglob("*.py")) == [], "a refused archive leaves nothing behind"


def test_a_zip_whose_header_lies_about_its_size_is_still_capped(scratch, monkeypatch):
    monkeypatch.setattr(discover, "MAX_BYTES", 1000)
    root = scratch / "subs"
    root.mkdir()
    make_zip(root / "liar.zip", {"solution.py": "x = 1\n" * 1000})
    data = bytearray((root / "liar.zip").read_bytes())
    # the central directory's and local header's uncompressed size: claim 10 bytes
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        at = data.index(signature)
        data[at + offset : at + offset + 4] = (10).to_bytes(4, "little")
    (root / "liar.zip").write_bytes(bytes(data))
    liar = find(root, scratch)["liar"]
    assert liar.path is None and "refused" in liar.problem


METADATA = """submission_101:
  :submitters:
  - :name: Ada Lovelace
    :sid: '100'
    :email: ada@example.edu
  :created_at: 2026-12-01 10:00:00.000000000 -08:00
  :score: 10.0
submission_202:
  :submitters:
  - :name: 'Pair One'
    :sid: '200'
  - :name: "Pair \\"Two\\""
    :sid: '201'
  :created_at: 2026-12-01 11:00:00.000000000 -08:00
submission_303:
  :submitters:
  - :name: Nobody Uploaded
"""


def gradescope_export(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "submission_metadata.yml").write_text(METADATA)
    (root / "submission_101").mkdir()
    (root / "submission_101" / "mha_screen.py").write_text(REFERENCE)
    (root / "submission_202").mkdir()
    make_zip(root / "submission_202" / "work.zip", {"attention.py": WITH_HELPER, "attn_helpers.py": HELPER})
    (root / "submission_303").mkdir()
    return root


def test_gradescope_metadata_is_parsed_from_its_yaml_subset(tmp_path):
    (tmp_path / "m.yml").write_text(METADATA)
    assert discover.gradescope_names(tmp_path / "m.yml") == {
        "submission_101": "Ada Lovelace",
        "submission_202": 'Pair One, Pair "Two"',
        "submission_303": "Nobody Uploaded",
    }


def test_gradescope_export_names_students(scratch):
    found = find(gradescope_export(scratch / "export"), scratch)
    assert sorted(found) == ["Ada Lovelace", "Nobody Uploaded", 'Pair One, Pair "Two"']
    assert "submission_101/ of Gradescope's export" in found["Ada Lovelace"].picked
    assert found['Pair One, Pair "Two"'].path.name == "attention.py"
    assert found["Nobody Uploaded"].path is None and "submission_303" in found["Nobody Uploaded"].problem


def test_gradescope_export_zip_given_whole(scratch):
    export = gradescope_export(scratch / "assignment_1_export")
    archive = scratch / "assignment_1_export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(export.rglob("*")):
            zf.write(path, path.relative_to(scratch).as_posix())  # folders too, as an export has them
    found = find(archive, scratch)
    assert sorted(found) == ["Ada Lovelace", "Nobody Uploaded", 'Pair One, Pair "Two"']


def test_what_students_submit_is_graded_end_to_end(scratch):
    """A helper-module layout, a zip with a helper and a folder one level down all load and pass,
    and each output says which file was graded and why."""
    root = scratch / "subs"
    (root / "alice").mkdir(parents=True)
    (root / "alice" / "attention.py").write_text(WITH_HELPER)
    (root / "alice" / "attn_helpers.py").write_text(HELPER)
    make_zip(root / "erin.zip", {"mha_screen.py": WITH_HELPER, "attn_helpers.py": HELPER})
    (root / "carol" / "hw3").mkdir(parents=True)
    (root / "carol" / "hw3" / "solution.py").write_text(BUGGY)
    out = scratch / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "attn_kit.cli",
            "grade",
            str(root),
            "-e",
            EXERCISE,
            "--seed",
            "5",
            "--jobs",
            "1",
            "--out",
            f"json={out / 'g.json'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert proc.returncode == 1, proc.stderr
    subs = {s["name"]: s for s in strict_json((out / "g.json").read_text())["submissions"]}
    assert subs["alice"]["report"]["passed"] and subs["erin"]["report"]["passed"], json.dumps(subs, indent=1)[:3000]
    assert subs["carol"]["bugs"] == ["no-scaling"]
    assert "attn_helpers.py" in subs["alice"]["picked"] and "hw3/" in subs["carol"]["picked"]
    assert not [p for p in scratch.iterdir() if p.name.startswith("attn-kit-submissions-")], "the extracted archives are removed"


def test_a_platform_submission_folder_with_a_zip_gives_a_valid_results_json(scratch):
    """As the Gradescope recipe runs it (`--single` on the submission folder): a student who
    uploaded a zip of the exercise file and its helper gets full marks, and the output says
    which file was graded."""
    submission = scratch / "submission"
    submission.mkdir()
    make_zip(submission / "hw.zip", {"hw/attention.py": WITH_HELPER, "hw/attn_helpers.py": HELPER, "hw/notes.txt": "hi"})
    results = scratch / "results" / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", "grade", str(submission), "--single", "-e", EXERCISE, "--seed", "3", "--jobs", "1"]
        + ["--out", f"gradescope={results}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    data = strict_json(results.read_text())
    assert data["score"] == sum(t["max_score"] for t in data["tests"]) > 0
    assert data["output_format"] == "text" and "attention.py" in data["extra_data"]["picked"] and "hw.zip" in data["output"]


def test_links_in_submissions_are_not_followed(scratch):
    """A link could make the kit (as root, or as the instructor) read a file the student may not,
    and show it in a syntax error: a linked submission is reported, a linked file ignored."""
    secret = scratch / "secret.py"
    secret.write_text("the instructor's answer key\n")
    root = scratch / "subs"
    (root / "ivan").mkdir(parents=True)
    (root / "ivan" / "solution.py").symlink_to(secret)
    (root / "judy.py").symlink_to(secret)
    found = find(root, scratch)
    assert found["ivan"].path is None and "no .py file" in found["ivan"].problem
    assert found["judy"].path is None and "symbolic link" in found["judy"].problem
