"""A board of your own tasks (issue 27): the commands of docs/leaderboards.md, from `gapbench leaderboard init` to a
ranked index.html, on the Cranfield and CACM SMART folders of tests/fixtures/smart; then what init and the board
refuse (a missing folder, a task twice, an existing suite.toml, a malformed one, data with another fingerprint) and how
a moved copy of the data is found by its content."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from docs_blocks import block, run_block, user_env

from gapbench.cli import main
from gapbench.identity import content_key

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SMART = ROOT / "tests" / "fixtures" / "smart"
BOARD = "boards/classic"


def _data(work: Path) -> Path:
    for name in ("cranfield", "cacm"):
        shutil.copytree(SMART / name, work / "data" / name)
    return work


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """A working folder after the docs' block: data/, runs/ and boards/classic with two scored submissions."""
    work = _data(tmp_path_factory.mktemp("own"))
    run_block(block("docs/leaderboards.md", "own-board"), work, user_env({"GAPBENCH_PROGRESS": "off"}))
    return work


def _copy(made: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(made, work)
    return work


def _mean(run_dir: Path, measure: str = "nDCG@10") -> float:
    """The mean `gapbench run` itself printed and stored for the run, before any submission was made."""
    return json.loads((run_dir / "results.json").read_text(encoding="utf-8"))["measures"][measure]


def test_the_docs_commands_build_a_board_that_ranks_both_systems(made):
    suite = tomllib.loads((made / BOARD / "suite.toml").read_text(encoding="utf-8"))
    assert (suite["name"], suite["measure"]) == ("classic", "nDCG@10")
    assert [(t["name"], t["path"]) for t in suite["tasks"]] == [("cranfield", "../../data/cranfield"),
                                                                 ("cacm", "../../data/cacm")]
    # each task is pinned by the content key of the data its runs were made on
    for task, run in zip(suite["tasks"], ("c1", "c2")):
        fps = json.loads((made / "runs" / "bm25" / run / "manifest.json").read_text(encoding="utf-8"))["fingerprints"]
        assert task["fingerprint"] == content_key(fps["corpus"], fps["queries"], fps["qrels"])
    board = json.loads((made / BOARD / "leaderboard.json").read_text(encoding="utf-8"))
    assert board["suite"] == "classic" and board["tasks"] == ["cranfield", "cacm"]
    entries = board["entries"]
    assert [(e["system"], e["rank"]) for e in entries] == [("bm25", 1), ("bm25-okapi", 2)]
    for entry, runs in zip(entries, ("bm25", "okapi")):
        c1, c2 = _mean(made / "runs" / runs / "c1"), _mean(made / "runs" / runs / "c2")
        assert entry["tasks"]["cranfield"]["mean"] == pytest.approx(c1, abs=1e-12)
        assert entry["tasks"]["cacm"]["mean"] == pytest.approx(c2, abs=1e-12)
        assert entry["average"] == pytest.approx((c1 + c2) / 2, abs=1e-12)
    # the published numbers of the docs' sentence, and bm25 0.3520 on Cranfield as `gapbench run` prints it
    assert [round(e["average"], 4) for e in entries] == [0.3883, 0.3343]
    assert round(entries[0]["tasks"]["cranfield"]["mean"], 4) == 0.3520
    assert board["tests"][0]["significant"] and round(board["tests"][0]["p_holm"], 4) == 0.0004
    # index.html ranks them in that order, each row with its average
    html = (made / BOARD / "index.html").read_text(encoding="utf-8")
    rows = re.findall(r'<a href="systems/([^"]+)\.html">', html)
    assert rows[:2] == ["bm25", "bm25-okapi"]
    at = [html.index(f"{e['average']:.4f}") for e in entries]
    assert at == sorted(at) and html.index('systems/bm25.html') < html.index('systems/bm25-okapi.html')


def _error(capsys) -> str:
    """The one-line error (after the notes a SMART folder's loading prints on stderr)."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("gapbench: error: ")]
    assert len(errors) == 1 and err.endswith(errors[0] + "\n"), err
    return errors[0]


def test_init_refuses_a_missing_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(_data(tmp_path))
    assert main(["leaderboard", "init", "boards/x", "--task", "data/cranfield", "--task", "data/cacmm"]) == 2
    err = _error(capsys)
    assert "no such folder 'data/cacmm'" in err and "data/cacm" in err
    assert not (tmp_path / "boards" / "x" / "suite.toml").exists()


def test_init_refuses_a_task_given_twice(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(_data(tmp_path))
    assert main(["leaderboard", "init", "boards/x", "--task", "data/cranfield", "--task", "data/cranfield/"]) == 2
    assert "tasks data/cranfield/ and data/cranfield would both be named 'cranfield'" in _error(capsys)
    shutil.copytree(tmp_path / "data" / "cranfield", tmp_path / "data" / "cran2")
    assert main(["leaderboard", "init", "boards/x", "--task", "data/cranfield", "--task", "data/cran2"]) == 2
    assert "task data/cran2 holds the same data as task data/cranfield (fingerprint local:" in _error(capsys)


def test_init_refuses_an_existing_suite_file_unless_forced(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(_data(tmp_path))
    (tmp_path / "boards" / "x").mkdir(parents=True)
    (tmp_path / "boards" / "x" / "suite.toml").write_text("# mine\n")
    assert main(["leaderboard", "init", "boards/x", "--task", "data/cacm"]) == 2
    assert "boards/x/suite.toml exists; write it again with force (`gapbench leaderboard init boards/x --task ... --force`" in _error(capsys)
    assert (tmp_path / "boards" / "x" / "suite.toml").read_text() == "# mine\n"
    assert main(["leaderboard", "init", "boards/x", "--task", "data/cacm", "--measure", "AP", "--force"]) == 0
    suite = tomllib.loads((tmp_path / "boards" / "x" / "suite.toml").read_text())
    assert (suite["name"], suite["measure"], [t["name"] for t in suite["tasks"]]) == ("x", "AP", ["cacm"])


MALFORMED = [
    ('name = "classic"\nmeasure = "nDCG@10"\n[[tasks]\n', 3, "is not valid TOML"),
    ('name = "classic"\n\n[[tasks]]\nname = "cranfield"\npath = "../../data/cranfield"\n', 3,
     "task 'cranfield': fingerprint None is missing"),
    ('name = "classic"\nmesure = "AP"\n', 2, "unknown key 'mesure'"),
]


@pytest.mark.parametrize("text, line, what", MALFORMED, ids=["syntax", "no-fingerprint", "unknown-key"])
def test_a_malformed_suite_file_is_named_with_its_line(tmp_path, capsys, monkeypatch, text, line, what):
    monkeypatch.chdir(tmp_path)
    (tmp_path / BOARD).mkdir(parents=True)
    (tmp_path / BOARD / "suite.toml").write_text(text)
    (tmp_path / "runs" / "bm25" / "c1").mkdir(parents=True)
    (tmp_path / "runs" / "bm25" / "c1" / "manifest.json").write_text("{}")  # the suite file is read first
    assert main(["submit", "create", "runs/bm25/c1", "--suite", BOARD, "--system", "x", "--description", "x.",
                 "--contact", "me", "--out", "sub"]) == 2
    err = _error(capsys)
    assert f"{BOARD}/suite.toml, line {line}: {what}" in err


def test_data_with_another_fingerprint_is_refused_naming_both(made, tmp_path, capsys):
    work = _copy(made, tmp_path)
    suite = tomllib.loads((work / BOARD / "suite.toml").read_text(encoding="utf-8"))
    pinned = {t["name"]: t["fingerprint"] for t in suite["tasks"]}
    # the Cranfield folder now holds CACM's files
    shutil.rmtree(work / "data" / "cranfield")
    shutil.copytree(SMART / "cacm", work / "data" / "cranfield")
    sub = work / BOARD / "submissions" / "bm25"
    assert main(["submit", "validate", str(sub)]) == 2
    lines = capsys.readouterr().err.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("gapbench: error: ")):]  # after the notes
    assert lines[0] == f"gapbench: error: invalid submission {sub}: 1 error in 1 file (exit 2)"
    assert lines[1] == f"{work / BOARD / 'suite.toml'}:"
    assert lines[2].startswith(f"  line 8: task 'cranfield': the folder {work / 'data' / 'cranfield'} holds "
                               f"data with fingerprint {pinned['cacm']}, but suite.toml pins {pinned['cranfield']}")
    assert "give the folder that holds it with --data DIR" in lines[2] and len(lines) == 3


def test_a_moved_copy_is_found_by_its_content(made, tmp_path, capsys):
    work = _copy(made, tmp_path)
    sub = work / BOARD / "submissions" / "bm25"
    # renamed beside its path: found among the path's siblings
    (work / "data" / "cranfield").rename(work / "data" / "cranfield-1400")
    assert main(["submit", "validate", str(sub)]) == 0
    # moved elsewhere: refused, then found through --data
    shutil.move(work / "data" / "cranfield-1400", work / "elsewhere")
    assert main(["submit", "validate", str(sub)]) == 2
    err = capsys.readouterr().err
    assert "task 'cranfield': found no folder" in err and "give the folder that holds it with --data DIR" in err
    assert main(["submit", "validate", str(sub), "--data", str(work / "elsewhere")]) == 0
    assert main(["leaderboard", "build", "--root", str(work / "boards"), "--data", str(work)]) == 0
    board = json.loads((work / BOARD / "leaderboard.json").read_text(encoding="utf-8"))
    assert [e["system"] for e in board["entries"]] == ["bm25", "bm25-okapi"]


def test_a_run_of_other_data_is_not_filed_under_the_board(made, tmp_path, capsys, monkeypatch):
    work = _copy(made, tmp_path)
    monkeypatch.chdir(work)
    (work / "boards" / "solo").mkdir()
    assert main(["leaderboard", "init", "boards/solo", "--task", "data/cacm"]) == 0
    capsys.readouterr()
    assert main(["submit", "create", "runs/bm25/c1", "--suite", "boards/solo", "--system", "x", "--description", "x.",
                 "--contact", "me", "--out", "sub"]) == 2
    err = _error(capsys)
    assert "runs/bm25/c1: the run was made on task" in err and "no task of the board 'solo' has it" in err
    assert not (work / "sub").exists()


@pytest.mark.parametrize("suite, said", [
    ("cranfield", "unknown suite 'cranfield'. Available: argus-paper, bright, impliret"),
    ("boards/none", "'boards/none' is neither a registered suite nor a folder with suite.toml"),
    ("boards", "boards: the folder holds no suite.toml; make it a board with `gapbench leaderboard init boards"),
])
def test_a_suite_that_is_neither_registered_nor_a_board_says_how_to_make_one(tmp_path, capsys, monkeypatch, suite,
                                                                               said):
    """The issue's first wall: `submit create --suite cranfield` said only 'unknown suite'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "boards").mkdir()
    (tmp_path / "runs" / "c1").mkdir(parents=True)
    (tmp_path / "runs" / "c1" / "manifest.json").write_text("{}")
    assert main(["submit", "create", "runs/c1", "--suite", suite, "--system", "x", "--description", "x.",
                 "--contact", "me", "--out", "sub"]) == 2
    err = _error(capsys)
    assert said in err and "gapbench leaderboard init" in err
