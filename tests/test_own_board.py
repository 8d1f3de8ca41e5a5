"""A board of your own tasks (issue 27): the commands of docs/leaderboards.md, from `gapbench leaderboard init` to a
ranked index.html, on the Cranfield and CACM SMART folders of tests/fixtures/smart; then what init and the board
refuse (a missing folder, a task twice, an existing suite.toml, a malformed one, data with another fingerprint) and how
a moved copy of the data is found by its content."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
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
def made(once_per_session) -> Path:
    """A working folder after the docs' block: data/, runs/ and boards/classic with two scored submissions. Run once
    in the whole session (``once_per_session``, tests/fx_models.py); tests that change it copy it (``_copy``)."""

    def make(work: Path) -> None:
        run_block(block("docs/leaderboards.md", "own-board"), _data(work), user_env({"GAPBENCH_PROGRESS": "off"}))

    return once_per_session("own-board-docs", make)


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
    ('name = "classic"\nmeasure = "nDCG@10"\n[[tasks]\n', 3, "malformed TOML"),
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


# ---------------------------------------------------------------- thin evidence and the minimum detectable effect

def _beir_folder(path: Path, n_queries: int, n_docs: int = 60) -> None:
    """A BEIR folder of made-up data: documents d0..d59, queries q0.., query q<i> judged relevant to d<i> only."""
    (path / "qrels").mkdir(parents=True)
    with (path / "corpus.jsonl").open("w") as fh:
        for i in range(n_docs):
            fh.write(json.dumps({"_id": f"d{i}", "title": f"doc {i}", "text": f"text of document {i}",
                                 "metadata": {}}) + "\n")
    with (path / "queries.jsonl").open("w") as fh:
        for i in range(n_queries):
            fh.write(json.dumps({"_id": f"q{i}", "text": f"question {i}", "metadata": {}}) + "\n")
    (path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"q{i}\td{i}\t1\n" for i in range(n_queries)))


def _run(n_queries: int, missed, name: str):
    """Per query its relevant document d<i> first with top-1 score 5 + i/1000 or, for the ``missed`` queries, ranked
    12th under 11 others (top-1 score 1 + i/1000): every miss has a lower top-1 score than every hit."""
    from gapbench.types import Run

    ranking = {}
    for i in range(n_queries):
        others = [f"d{(i + j) % 60}" for j in range(1, 12)]
        top = (1.0 if i in missed else 5.0) + i / 1000
        order = others + [f"d{i}"] if i in missed else [f"d{i}"] + others
        ranking[f"q{i}"] = {d: top - r * 0.01 for r, d in enumerate(order)}
    return Run(ranking, name)


@pytest.fixture(scope="module")
def thin(once_per_session) -> Path:
    """A board of two made-up tasks of 43 and 40 queries (83, as the issue's DBpedia and MS MARCO subsets): "sharp"
    misses one query on each, "blunt" every odd one. Built once in the whole session; read-only."""
    return once_per_session("own-board-thin", _make_thin) / "boards" / "own"


def _make_thin(work: Path) -> None:
    from gapbench.products.board_suites import init_suite, read_suite_file
    from gapbench.products.leaderboard import build_boards
    from gapbench.products.submissions.write import score_submission, write_submission

    sizes = {"dbp": 43, "marco": 40}
    for name, n in sizes.items():
        _beir_folder(work / "data" / name, n)
    init_suite(work / "boards" / "own", [str(work / "data" / t) for t in sizes])
    suite = read_suite_file(work / "boards" / "own")
    for system, missed in (("sharp", {t: {0} for t in sizes}),
                           ("blunt", {t: set(range(1, n, 2)) for t, n in sizes.items()})):
        d = write_submission(work / "boards" / "own" / "submissions" / system, system=system,
                             description=f"{system}.", suite=suite, contact="me@example.org",
                             runs={t: _run(n, missed[t], system) for t, n in sizes.items()},
                             adapter={"name": system, "config": {}})
        score_submission(d)
    build_boards(work / "boards")


def test_a_row_with_one_miss_per_task_shows_no_weak_signal_auc_and_says_why(thin):
    board = json.loads((thin / "leaderboard.json").read_text(encoding="utf-8"))
    sharp = next(e for e in board["entries"] if e["system"] == "sharp")["profile"]
    # per task and pooled: no number, the reason with the counts
    for task, n in (("dbp", 43), ("marco", 40)):
        sig = sharp["tasks"][task]["signal"]
        assert (sig["separation"], sig["ci95"], sig["orientation"]) == (None, None, None)
        assert (sig["n"], sig["n_weak"], sig["reason"]) == (n, 1, f"too few weak retrievals (1 of {n})")
    pooled = sharp["signal"]
    assert (pooled["separation"], pooled["n"], pooled["n_weak"]) == (None, 83, 2)
    assert pooled["reason"] == "too few weak retrievals (2 of 83)"
    # the other row has 21 + 20 weak retrievals, each with a lower top-1 score than every good one: AUC 1, shown
    blunt = next(e for e in board["entries"] if e["system"] == "blunt")["profile"]["signal"]
    assert (blunt["separation"], blunt["ci95"], blunt["n_weak"], blunt["reason"]) == (1.0, [1.0, 1.0], 41, None)
    page = (thin / "index.html").read_text(encoding="utf-8")
    row = next(r for r in page.split("<tr>") if '>sharp</a>' in r).split("</tr>")[0]
    assert ('title="n = 83 queries: 2 weak, 81 good; not shown: too few weak retrievals (2 of 83)"><span '
            'class="sub">too few weak retrievals (2 of 83)</span></td>') in row
    assert "1.000" not in row.split("too few")[0].rsplit("<td", 1)[1]
    system = (thin / "systems" / "sharp.html").read_text(encoding="utf-8")
    assert "too few weak retrievals (1 of 43)" in system and "too few weak retrievals (1 of 40)" in system
    readme = (thin / "README.md").read_text(encoding="utf-8")
    assert "| too few weak retrievals (2 of 83) |" in readme


def test_every_statistic_of_a_row_carries_its_n(thin):
    board = json.loads((thin / "leaderboard.json").read_text(encoding="utf-8"))
    page = (thin / "index.html").read_text(encoding="utf-8")
    for e in board["entries"]:
        assert e["n_queries"] == 83 and e["profile"]["n_queries"] == 83
        assert {t: s["n"] for t, s in e["tasks"].items()} == {"dbp": 43, "marco": 40}
        assert {t: p["n_queries"] for t, p in e["profile"]["tasks"].items()} == {"dbp": 43, "marco": 40}
        assert e["profile"]["signal"]["n"] == 83
        row = next(r for r in page.split("<tr>") if f">{e['system']}</a>" in r).split("</tr>")[0]
        cells = re.findall(r"<td[^>]*>", row)[2:]  # after rank and system: every statistic's cell
        assert all("title=" in c for c in cells), cells
        assert "n = 83 queries over 2 tasks" in row and "n = 43 queries" in row and "n = 40 queries" in row


def test_the_board_holds_and_shows_its_minimum_detectable_effect(thin):
    from gapbench.evaluation.stats import detectable_effect

    board = json.loads((thin / "leaderboard.json").read_text(encoding="utf-8"))
    mde = board["mde"]
    assert (mde["alpha"], mde["power"]) == (0.05, 0.8)
    per_task = {}
    for task in ("dbp", "marco"):
        a, b = (json.loads((thin / "submissions" / s / "scores.json").read_text())["tasks"][task]["per_query"]
                ["nDCG@10"] for s in ("sharp", "blunt"))
        d = np.array([a[q] - b[q] for q in a])
        # one pair of ranked systems: its own spread; se = sd / sqrt(n) on n - 1 degrees of freedom
        sd = float(np.std(d, ddof=1))
        m = mde["tasks"][task]
        assert (m["n"], m["n_pairs"], m["df"], m["reason"]) == (d.size, 1, d.size - 1, None)
        assert m["sd_diff"] == pytest.approx(sd, abs=1e-12)
        assert m["mde"] == pytest.approx(detectable_effect(sd / np.sqrt(d.size), d.size - 1), abs=1e-12)
        per_task[task] = (sd ** 2 / d.size, d.size - 1)
    se = np.sqrt(sum(v for v, _ in per_task.values())) / 2
    df = sum(v for v, _ in per_task.values()) ** 2 / sum(v ** 2 / f for v, f in per_task.values())
    avg = mde["average"]
    assert (avg["n"], avg["sd_diff"]) == (83, None)
    assert avg["se"] == pytest.approx(se, abs=1e-12) and avg["df"] == pytest.approx(df, abs=1e-9)
    assert avg["mde"] == pytest.approx(detectable_effect(se, df), abs=1e-12)
    page = (thin / "index.html").read_text(encoding="utf-8")
    foot = page.split("<tfoot>")[1].split("</tfoot>")[0]
    assert "Min. detectable effect" in foot
    assert [f"{mde['average']['mde']:.4f}", f"{mde['tasks']['dbp']['mde']:.4f}",
            f"{mde['tasks']['marco']['mde']:.4f}"] == re.findall(r">(\d\.\d{4})</td>", foot)
    assert "Minimum detectable effect (MDE):" in page
