"""`attn-kit grade`'s outputs against hostile names, messages and planted links.

The attacks: a file name that is not UTF-8, a lone surrogate in an exception message, escape
codes, newlines, rich markup, U+FFFE and control characters in names, CSV cells a spreadsheet
would evaluate, two submissions that map to one file name, symbolic links planted at the output
paths (to the history database) or as the output folder. Each format must still be written, be
valid (UTF-8, strict JSON, XML that junit-10.xsd accepts, CSV with no formula), keep every
submission apart, and write nothing through a link. Most cases use a made-up run (Batch) so that
every format meets every hostile string without grading; the end-to-end cases run the CLI.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from junit_xsd import XSD, validate

from attn_kit.base.paths import solutions_dir
from attn_kit.base.text import file_stem, for_csv, for_terminal, for_xml, valid_unicode
from attn_kit.batch import outputs, run
from attn_kit.batch.formats import FORMATS, NAMES, SUFFIXES
from attn_kit.grading.pipeline import BLOCKED

from helpers import strict_json

EXERCISE = "mha-screen"
NOT_UTF8 = os.fsdecode(b"caf\xe9-\xff")  # a Latin-1 name: lone surrogates once decoded
HOSTILE_NAMES = [
    NOT_UTF8,
    "\x1b[32mPASS\x1b[0m",
    "two\nlines 47/47",
    '=HYPERLINK("http://x")',
    "+1",
    "-2",
    "@SUM(A1)",
    "[bold red]markup[/]",
    "bell\x07and\x00nul",
    "bad\ufffe\uffffxml",
    "\u202eevil",
]
HOSTILE_MESSAGE = "raised ValueError: \ud800 lone \udcff and \x1b]0;title\x07 and \x0b"


def _report(name: str, message: str) -> dict:
    checks = [
        {"id": "shape", "title": "Output shape", "status": "fail", "message": message, "bug": None, "points": 0, "max_points": 3},
        {"id": "values", "title": "Values", "status": "skip", "message": f"{BLOCKED} `shape` did not pass; fix that first"},
        {"id": "grads", "title": "Gradients", "status": "skip", "message": "does not apply: no torch"},
        {"id": "mask", "title": "Mask", "status": "pass", "message": "", "bug": None, "points": 2, "max_points": 2},
        {"id": "raises", "title": "Raises", "status": "error", "message": message, "bug": "no-scaling", "points": 0, "max_points": 1},
    ]
    for c in checks:
        c.setdefault("bug", None)
        c.setdefault("points", 0)
        c.setdefault("max_points", 4 if c["id"] == "values" else 1)
        c.update(public=c["id"] != "raises", notes=[])
    return {
        "exercise": EXERCISE,
        "path": name,
        "passed": False,
        "score": {"passed": 1, "total": 5, "points": 2, "max_points": 11},
        "seed": 1,
        "public_only": False,
        "checks": checks,
        "diagnosis": [{"bug": "no-scaling", "title": "No scaling", "evidence": message}],
        "near_misses": [],
        "notes": [],
    }


def hostile_batch(names=HOSTILE_NAMES) -> run.Batch:
    results = []
    for i, name in enumerate(names):
        if i % 3 == 2:
            results.append(run.Result(name, f"/subs/{name}.py", run.UNLOADABLE, error=HOSTILE_MESSAGE, picked=f"{name}.py: why \udcff"))
        else:
            times = {"shape": 0.0123, "mask": 0.5, "raises": 1.25, "values": 0.0, "grads": 0.0}
            report = _report(name, HOSTILE_MESSAGE)
            results.append(run.Result(name, f"/subs/{name}.py", run.GRADED, report, "", 2.5, picked=f"{name}.py", check_seconds=times))
    checks = [
        {"id": i, "title": i, "points": p, "public": True}
        for i, p in (("shape", 3), ("values", 4), ("grads", 1), ("mask", 2), ("raises", 1))
    ]
    return run.Batch(EXERCISE, 7, results, checks, 12.0, 2)


def write_all(batch: run.Batch, out: Path) -> dict[str, outputs.Written]:
    where = {"csv": out / "g.csv", "json": out / "g.json", "junit": out / "r.xml", "gradescope": out / "gs", "prairielearn": out / "pl"}
    assert set(where) == set(NAMES), "a format this test does not cover"
    return {fmt: outputs.write(batch, fmt, path) for fmt, path in where.items()}


def no_surrogates(value) -> bool:
    if isinstance(value, str):
        return valid_unicode(value) == value
    if isinstance(value, dict):
        return all(no_surrogates(k) and no_surrogates(v) for k, v in value.items())
    if isinstance(value, list):
        return all(no_surrogates(v) for v in value)
    return True


# --- the registry ----------------------------------------------------------------------------------


def test_each_format_is_one_module_named_once():
    folder = Path(outputs.__file__).parent / "formats"
    modules = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    assert sorted(NAMES) == modules == sorted(FORMATS)
    assert SUFFIXES == {".csv": "csv", ".json": "json", ".xml": "junit"}
    kit = Path(outputs.__file__).parent.parent
    for path in [*kit.joinpath("cli").glob("*.py"), *kit.joinpath("batch").glob("*.py"), *kit.joinpath("render").glob("*.py")]:
        text = path.read_text(encoding="utf-8")
        for name in ("csv", "junit"):  # (gradescope and prairielearn are recipes' names too)
            assert f'"{name}"' not in text and f"'{name}'" not in text, f"{path} names the {name} format itself"
    docs = (Path(__file__).resolve().parents[1] / "docs" / "grading.md").read_text(
        encoding="utf-8"
    )  # the project's, not the installed kit's
    for name in NAMES:
        assert f"| `{name}` |" in docs, f"docs/grading.md's table of formats misses {name}"


# --- hostile names and messages in every format -------------------------------------------------------


def test_every_format_survives_every_hostile_name_and_message(tmp_path):
    batch = hostile_batch()
    written = write_all(batch, tmp_path)
    for fmt, w in written.items():
        assert not w.failed, (fmt, w.failed)
        for path in w.files:
            path.read_bytes().decode("utf-8")  # valid UTF-8: no lone surrogate reached the file
    assert len(written["gradescope"].files) == len(written["prairielearn"].files) == len(HOSTILE_NAMES)
    assert len({p.name for p in written["gradescope"].files}) == len(HOSTILE_NAMES)
    for path in [*written["gradescope"].files, *written["prairielearn"].files, tmp_path / "g.json"]:
        assert no_surrogates(strict_json(path.read_text(encoding="utf-8"))), path
    record = strict_json((tmp_path / "g.json").read_text(encoding="utf-8"))
    names = [s["name"] for s in record["submissions"]]
    assert names[0] == "caf\\xe9-\\xff" and names[1:] == HOSTILE_NAMES[1:], "names are carried, escaped only where they must be"
    first = record["submissions"][0]
    assert bytes.fromhex(first["path_bytes"]) == b"/subs/caf\xe9-\xff.py", "the record keeps a non-UTF-8 path losslessly"
    assert run.Batch.from_json(record).results[0].path == f"/subs/{NOT_UTF8}.py"


def test_csv_cells_are_never_formulas(tmp_path):
    outputs.write(hostile_batch(), "csv", tmp_path / "g.csv")
    rows = list(csv.reader(io.StringIO((tmp_path / "g.csv").read_text(encoding="utf-8"))))
    assert len(rows) == 1 + len(HOSTILE_NAMES), "a newline in a name stays inside its quoted cell"
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    assert [r[0] for r in rows[1:]][3:7] == ['\'=HYPERLINK("http://x")', "'+1", "'-2", "'@SUM(A1)"]
    assert for_csv("alice") == "alice" and for_csv("-1") == "'-1"


def test_junit_validates_against_junit_10_xsd_and_its_counts_agree_with_the_score(tmp_path):
    batch = hostile_batch()
    outputs.write(batch, "junit", tmp_path / "r.xml")
    validate(tmp_path / "r.xml")  # raises with the first violation
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.get("skipped") is None, "junit-10.xsd has no `skipped` on <testsuites>"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [for_xml(n) for n in HOSTILE_NAMES]
    for suite, result in zip(suites, batch.results):
        counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
        if result.state != run.GRADED:
            assert counts == {"tests": 1, "failures": 0, "errors": 1, "skipped": 0}
            continue
        assert counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"] == result.report["score"]["passed"]
        cases = {c.get("name"): c for c in suite.findall("testcase")}
        blocked = cases["values"].find("failure")
        assert blocked is not None and blocked.get("type") == "not run" and "`shape` did not pass" in blocked.get("message")
        assert cases["grads"].find("skipped") is not None, "a check that does not apply stays skipped"
        assert [cases[i].get("time") for i in ("shape", "mask", "raises")] == ["0.012", "0.500", "1.250"], "real per-check times"
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)


@pytest.mark.parametrize("structural", [False, True], ids=["xmlschema", "structural"])
def test_the_validator_rejects_what_the_old_junit_wrote(tmp_path, monkeypatch, structural):
    """The validator can fail: the old output's `skipped` on <testsuites>, a time that is not
    SUREFIRE_TIME, a testcase without a name, text where none may be are each refused."""
    import junit_xsd

    if structural:
        monkeypatch.setattr(junit_xsd, "xmlschema", None)
    elif junit_xsd.xmlschema is None:
        pytest.skip("xmlschema is not installed (the dev extra installs it); the structural check runs")
    outputs.write(hostile_batch(HOSTILE_NAMES[:2]), "junit", tmp_path / "r.xml")
    good = (tmp_path / "r.xml").read_text(encoding="utf-8")
    validate(good)
    for bad in (
        good.replace("<testsuites ", '<testsuites skipped="1" ', 1),
        good.replace('time="2.500"', 'time="2.5 s"', 1),
        re.sub(r'<testcase classname="([^"]*)" name="[^"]*"', r'<testcase classname="\1"', good, count=1),
        good.replace("<properties>", "<properties>stray", 1),
    ):
        assert bad != good
        with pytest.raises(Exception):  # noqa: B017 - xmlschema's error or the structural AssertionError
            validate(bad)


def test_the_vendored_xsd_keeps_its_licence():
    text = XSD.read_text(encoding="utf-8")
    assert "The MIT License (MIT)" in text and "Gregory Boissinot" in text


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_terminal_text_is_one_plain_line(name):
    shown = for_terminal(name)
    assert shown.isprintable() or all(ch.isprintable() for ch in shown), repr(shown)
    assert "\x1b" not in shown and "\n" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert valid_unicode(shown) == shown


def test_file_stems_are_plain_file_names():
    for name in [*HOSTILE_NAMES, "../../etc/passwd", ".hidden", "a/b", "", "x" * 300]:
        stem = file_stem(name)
        assert stem and "/" not in stem and not stem.startswith(".") and len(stem) <= 120
        stem.encode("utf-8")


# --- unique names --------------------------------------------------------------------------------------


def test_a_folder_and_a_file_of_one_name_are_two_submissions(tmp_path):
    subs = tmp_path / "subs"
    (subs / "s1").mkdir(parents=True)
    shutil.copy(solutions_dir(EXERCISE) / "reference_numpy.py", subs / "s1" / "solution.py")
    shutil.copy(solutions_dir(EXERCISE) / "bugs" / "no-scaling.py", subs / "s1.py")
    found = run.find_submissions(subs)
    assert sorted(s.name for s in found) == ["s1", "s1.py"]
    assert {s.name: s.path for s in found} == {"s1": subs / "s1" / "solution.py", "s1.py": subs / "s1.py"}
    assert all(s.picked for s in found), "why each file was picked"


def test_names_that_make_one_file_name_get_two_files(tmp_path):
    batch = hostile_batch(["a/b", "a:b", "a_b", "A_B"])
    written = outputs.write(batch, "gradescope", tmp_path / "gs")
    assert len(written.files) == 4 and len({p.name.casefold() for p in written.files}) == 4
    assert sorted(p.name for p in (tmp_path / "gs").iterdir()) == sorted(p.name for p in written.files)


# --- links planted in output folders -----------------------------------------------------------------


def test_a_link_planted_at_an_output_is_replaced_not_followed(tmp_path):
    history = tmp_path / "home" / "history.db"
    history.parent.mkdir()
    history.write_bytes(b"SQLite format 3\x00 the user's history")
    out = tmp_path / "out"
    (out / "gs").mkdir(parents=True)
    for name in ("g.csv", "g.json", "r.xml"):
        (out / name).symlink_to(history)
    batch = hostile_batch(["alice", "bob"])
    (out / "gs" / "alice.json").symlink_to(history)
    written = write_all(batch, out)
    assert history.read_bytes() == b"SQLite format 3\x00 the user's history"
    for path in (out / "g.csv", out / "g.json", out / "r.xml", out / "gs" / "alice.json"):
        assert not path.is_symlink() and path.is_file()
    assert all(not w.failed for w in written.values())


def test_a_linked_output_folder_is_refused_and_the_rest_is_written(tmp_path):
    elsewhere = tmp_path / "kit-install"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "gs").symlink_to(elsewhere, target_is_directory=True)
    written = write_all(hostile_batch(["alice", "bob"]), out)
    assert list(elsewhere.iterdir()) == []
    assert [p.name for p, _ in written["gradescope"].failed] == ["alice.json", "bob.json"] and not written["gradescope"].files
    assert "symbolic link" in written["gradescope"].failed[0][1]
    assert (out / "g.csv").is_file() and (out / "pl" / "alice.json").is_file()


def test_one_submission_that_cannot_be_written_costs_only_itself(tmp_path):
    (tmp_path / "gs" / "bob.json").mkdir(parents=True)  # a folder where bob's file goes
    written = outputs.write(hostile_batch(["alice", "bob", "carol"]), "gradescope", tmp_path / "gs")
    assert [p.name for p in written.files] == ["alice.json", "carol.json"]
    assert [p.name for p, _ in written.failed] == ["bob.json"]


# --- the CLI end to end ----------------------------------------------------------------------------------


def cli(*args, env=None, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    """The CLI in a fresh interpreter, its output as bytes (so a raw ESC or CR would show)."""
    return subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", *map(str, args)],
        capture_output=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
        cwd=cwd,
    )


RAISES = "\n\ndef multi_head_attention(*args, **kwargs):\n    raise ValueError({})\n"


def hostile_folder(root: Path) -> Path:
    subs = root / "subs"
    (subs / "s1").mkdir(parents=True)
    reference = solutions_dir(EXERCISE) / "reference_numpy.py"
    shutil.copy(reference, subs / "s1" / "solution.py")
    shutil.copy(reference, subs / "s1.py")
    shutil.copy(reference, os.fsencode(subs) + b"/caf\xe9.py")
    shutil.copy(solutions_dir(EXERCISE) / "bugs" / "no-scaling.py", subs / "\x1b[32mok\x1b[0m\n=1+1 47-47 [bold]x.py")
    (subs / "raises.py").write_text(
        reference.read_text(encoding="utf-8") + RAISES.format(r"'\ud800 lone \x1b[2J' + chr(0xFFFE)"), encoding="utf-8"
    )
    return subs


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-grade")
    subs = hostile_folder(root)
    home = root / "home"
    home.mkdir()
    history = home / "history.db"
    history.write_bytes(b"the user's history")
    out = root / "out"
    out.mkdir()
    (out / "grades.csv").symlink_to(history)
    args = ["grade", subs, "-e", EXERCISE, "--seed", 3, "--jobs", 1, "--timeout", 5]
    args += ["--out", f"csv={out / 'grades.csv'}", "--out", f"json={out / 'grades.json'}", "--out", f"junit={out / 'report.xml'}"]
    args += ["--out", f"gradescope={out / 'gs'}", "--out", f"prairielearn={out / 'pl'}"]
    proc = cli(*args, env={"ATTN_KIT_HOME": str(home)})
    return proc, out, history


def test_a_hostile_cohort_is_graded_and_every_output_written(hostile_run):
    proc, out, history = hostile_run
    assert proc.returncode == 1, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr
    assert history.read_bytes() == b"the user's history" and not (out / "grades.csv").is_symlink()
    record = strict_json((out / "grades.json").read_text(encoding="utf-8"))
    assert no_surrogates(record)
    assert len(record["submissions"]) == 5 and len({s["name"] for s in record["submissions"]}) == 5
    by_name = {s["name"]: s for s in record["submissions"]}
    assert by_name["s1"]["report"]["passed"] and by_name["s1.py"]["report"]["passed"] and by_name["caf\\xe9"]["report"]["passed"]
    assert by_name["caf\\xe9"]["path_bytes"] is not None
    assert "solution.py" in by_name["s1"]["picked"]
    validate(out / "report.xml")
    assert len(list((out / "gs").iterdir())) == len(list((out / "pl").iterdir())) == 5
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))))
    assert len(rows) == 6 and not any(cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)
    assert b"wrote gradescope: 5 files" in proc.stdout


def test_the_table_shows_names_as_plain_escaped_text(hostile_run):
    proc, _, _ = hostile_run
    for stream in (proc.stdout, proc.stderr):
        assert b"\x1b" not in stream and b"\x07" not in stream and b"\r" not in stream
    table = proc.stdout.decode("utf-8").splitlines()
    rows = [line for line in table if "/47" in line]
    assert len(rows) == 5, "one line per submission: no name paints a row of its own"
    assert sum("47/47" in line for line in rows) == 3
    assert any("\\e[32mok\\e[0m\\n=1+1" in line and "[bold]x" in line for line in rows), table


def test_an_output_that_cannot_be_written_gives_exit_status_3_and_the_rest(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(solutions_dir(EXERCISE) / "reference_numpy.py", subs / "alice.py")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    proc = cli(
        "grade",
        subs,
        "-e",
        EXERCISE,
        "--seed",
        1,
        "--jobs",
        1,
        "--out",
        f"csv={tmp_path / 'linked' / 'g.csv'}",
        "--out",
        f"json={tmp_path / 'g.json'}",
    )
    assert proc.returncode == 3, proc.stderr.decode()
    assert b"could not write csv" in proc.stderr and b"Traceback" not in proc.stderr
    assert (tmp_path / "g.json").is_file() and list((tmp_path / "elsewhere").iterdir()) == []
    help_text = cli("grade", "--help").stdout.decode()
    assert "3 the run broke" in " ".join(help_text.split())


def test_check_json_is_valid_unicode_whatever_the_candidate_raises(tmp_path):
    file = tmp_path / "raises.py"
    reference = solutions_dir(EXERCISE) / "reference_numpy.py"
    file.write_text(reference.read_text(encoding="utf-8") + RAISES.format(r"'\ud800 and \udcff'"), encoding="utf-8")
    proc = cli("check", file, "-e", EXERCISE, "--json", "--seed", 1, "--timeout", 5)
    text = proc.stdout.decode("utf-8")
    data = strict_json(text)
    assert no_surrogates(data) and "\\ud800" not in text.replace("\\\\ud800", "")
    assert any("\\ud800 and \\xff" in c["message"] for c in data["checks"]), "the message is kept, its surrogates written out"


def test_at_a_terminal_no_name_reaches_the_screen_raw(tmp_path):
    """The progress bar and the table at a real 80x24 pseudo-terminal: a name carrying a title
    change, a bell and rich markup is shown written out, never acted on or applied."""
    pexpect = pytest.importorskip("pexpect")
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(solutions_dir(EXERCISE) / "reference_numpy.py", subs / "\x1b]0;pwned\x07[bold]x.py")
    shutil.copy(solutions_dir(EXERCISE) / "reference_numpy.py", subs / "plain.py")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", "grade", str(subs), "-e", EXERCISE, "--seed", "1", "--jobs", "1"],
        env=dict(os.environ),
        dimensions=(24, 80),
        timeout=300,
    )
    child.expect(pexpect.EOF)
    child.close()
    raw = child.before
    assert b"\x07" not in raw and b"\x1b]0;" not in raw
    assert b"\\e]0;pwned\\x07[bold]x" in raw
    assert child.exitstatus == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="as root only: folders of another uid")
def test_as_root_a_link_in_a_folder_a_submission_could_write_is_never_followed(tmp_path):
    """As root, the worker runs as uid 65534: a folder it owns, or a world-writable sticky one,
    may hold its link to a file of the kit's. The first is refused, the second has the link
    replaced or the write refused; the kit's file is never written."""
    installed = tmp_path / "reference_numpy.py"
    installed.write_text("the installed reference\n")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "g.csv").symlink_to(installed)
    os.lchown(theirs / "g.csv", 65534, 65534)
    os.chown(theirs, 65534, 65534)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "g.csv").symlink_to(installed)
    os.lchown(shared / "g.csv", 65534, 65534)
    batch = hostile_batch(["alice"])
    refused = outputs.write(batch, "csv", theirs / "g.csv")
    assert not refused.files and "another user" in refused.failed[0][1]
    outputs.write(batch, "csv", shared / "g.csv")
    assert installed.read_text() == "the installed reference\n"
    assert (theirs / "g.csv").is_symlink()


def test_a_writer_that_fails_costs_its_file_only(tmp_path, monkeypatch):
    """A bug in one format's writer (here: one submission's gradescope file raises) is reported
    for that file; the other submissions' files are written."""
    from attn_kit.batch import formats

    real = formats.FORMATS["gradescope"]

    def flaky(batch, result, hidden_details):
        if result.name == "bob":
            raise RuntimeError("boom \ud800")
        return real.render(batch, result, hidden_details)

    monkeypatch.setitem(formats.FORMATS, "gradescope", formats.Format("gradescope", flaky, per_submission=True))
    written = outputs.write(hostile_batch(["alice", "bob", "carol"]), "gradescope", tmp_path / "gs")
    assert [p.name for p in written.files] == ["alice.json", "carol.json"]
    assert [p.name for p, _ in written.failed] == ["bob.json"] and "RuntimeError: boom \\ud800" in written.failed[0][1]
