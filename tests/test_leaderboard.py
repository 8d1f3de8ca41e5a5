"""Leaderboards from real scored submissions (bm25, bm25-lucene and a damaged bm25 on two ImpliRet sets): averages,
bootstrap CIs, tie groups by Holm-corrected paired tests, rank stability, rendering, exports, and the committed board."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import gapbench
from gapbench.cli import main
from gapbench.formats import read_trec_run
from gapbench.products.exports import export_trec
from gapbench.products.leaderboard import LeaderboardOptions, build_board, build_boards
from gapbench.products.mteb_export import export_mteb, mteb_metric_name
from gapbench.errors import OptionsError, SubmissionError
from gapbench.evaluation.stats import holm, randomization_test
from gapbench.products.submissions.validate import load_scores
from gapbench.products.submissions.write import score_submission, write_submission
from gapbench.suites import SUITES, Suite
from fx_boards import MINI_SUITE as SUITE
from fx_boards import MINI_TASKS as TASKS

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def _setup():
    import gapbench.tasks  # noqa: F401  built-in suites first

    SUITES.register(SUITE, Suite(SUITE, TASKS, "two ImpliRet sets, for tests"), replace=True)
    yield
    SUITES.unregister(SUITE)


@pytest.fixture()
def board_root(mini_cached) -> Path:
    """Three scored submissions of real runs (bm25, bm25-lucene, a damaged bm25) on TASKS, made once per session
    (tests/fx_boards.py's ``mini_board``), their validation and scores in this test's cache. Read-only: a test that
    changes or builds copies it."""
    return mini_cached


def _subs(root: Path) -> list[Path]:
    return sorted((root / SUITE / "submissions").iterdir())


@pytest.fixture(scope="module")
def board(mini_board):
    """The board with default settings, as ``build_board`` made it of ``mini_board``'s submissions."""
    from gapbench.schemas.leaderboard import Leaderboard

    return Leaderboard.model_validate_json((mini_board / "board.json").read_text())


def test_averages_cis_and_tie_groups(board_root, board):
    scores = {p.name: load_scores(p) for p in _subs(board_root)}
    # Full Benchmark Avg. = unweighted mean of the task means; bm25's task means are the published-reproducing ones.
    assert scores["bm25"]["tasks"][TASKS[0]]["measures"]["nDCG@10"] == pytest.approx(0.1416, abs=5e-5)
    assert scores["bm25"]["tasks"][TASKS[1]]["measures"]["nDCG@10"] == pytest.approx(0.1518, abs=5e-5)
    for e in board.entries:
        means = [scores[e.system]["tasks"][t]["measures"]["nDCG@10"] for t in TASKS]
        assert e.average == pytest.approx(sum(means) / 2, abs=1e-12)
        assert e.average_ci95[0] < e.average < e.average_ci95[1]
        assert e.tasks[TASKS[0]].ci95 == scores[e.system]["tasks"][TASKS[0]]["ci95"]["nDCG@10"]
    assert scores["bm25"]["full_benchmark_avg"]["nDCG@10"] == pytest.approx(board.entry("bm25").average, abs=1e-12)

    # Recompute the paired tests independently: weighted stacked per-query values, Holm over the 3 pairs.
    systems = ["bm25", "bm25-damaged", "bm25-lucene"]
    vec = {}
    for s in systems:
        parts = []
        for t in TASKS:
            pq = scores[s]["tasks"][t]["per_query"]["nDCG@10"]
            parts.append(np.array([pq[q] for q in scores["bm25"]["tasks"][t]["per_query"]["nDCG@10"]]) / 2)
        n = sum(len(p) for p in parts)
        vec[s] = np.concatenate([p * n / len(p) for p in parts])
    pairs = [("bm25", "bm25-damaged"), ("bm25", "bm25-lucene"), ("bm25-damaged", "bm25-lucene")]
    p = [randomization_test(vec[a], vec[b]) for a, b in pairs]
    adj = dict(zip(pairs, holm(p)))
    for t in board.tests:
        key = tuple(sorted((t.a, t.b)))
        assert t.p_holm == pytest.approx(adj[key])
        assert t.delta == pytest.approx(board.entry(t.a).average - board.entry(t.b).average, abs=1e-12)
    # rank = 1 + number of systems significantly better
    for e in board.entries:
        better = sum(1 for t in board.tests if t.b == e.system and t.significant)
        assert e.rank == 1 + better
    # The real outcome: bm25 and bm25-lucene are not separable (shared rank 1), the damaged run is worse than both.
    assert adj[("bm25", "bm25-lucene")] >= 0.05 and adj[("bm25", "bm25-damaged")] < 0.05
    assert [(e.system, e.rank) for e in board.entries] == [("bm25", 1), ("bm25-lucene", 1), ("bm25-damaged", 3)]
    stab = {e.system: e.rank_stability for e in board.entries}
    assert stab["bm25-damaged"] == 1.0 and 0.0 < stab["bm25-lucene"] < 1.0 and 0.0 < stab["bm25"] < 1.0


def test_rank_stability_is_the_bootstrap_share(board_root):
    board = build_board(_subs(board_root), SUITE, LeaderboardOptions(n_resamples=200, seed=3))
    scores = {p.name: load_scores(p) for p in _subs(board_root)}
    systems = [e.system for e in sorted(board.entries, key=lambda e: e.system)]
    rng = np.random.default_rng(3)
    total = np.zeros((200, len(systems)))
    for t in TASKS:
        qids = list(scores["bm25"]["tasks"][t]["per_query"]["nDCG@10"])
        m = np.array([[scores[s]["tasks"][t]["per_query"]["nDCG@10"][q] for q in qids] for s in systems])
        idx = rng.integers(0, len(qids), size=(200, len(qids)))
        for i in range(len(systems)):
            total[:, i] += m[i][idx].mean(axis=1)
    total /= len(TASKS)
    avg = {s: board.entry(s).average for s in systems}
    for i, s in enumerate(systems):
        pos = 1 + sum(avg[o] > avg[s] for o in systems)
        share = np.mean([1 + np.sum(total[b] > total[b, i]) == pos for b in range(200)])
        assert board.entry(s).rank_stability == pytest.approx(share)
        lo, hi = np.quantile(total[:, i], [0.025, 0.975])
        assert board.entry(s).average_ci95 == pytest.approx([lo, hi])


def test_the_stratified_bootstrap_draws_large_query_sets_in_blocks():
    """1,000 resamples x 2,500 queries is 2.5M indices, over resample_blocks' 2M: the draws come in blocks of 800 and
    200 resamples from the one generator, in that order (at most 2M they are one draw, as the test above checks)."""
    from gapbench.products.leaderboard import _stratified_bootstrap

    n = 2500
    m = np.random.default_rng(7).random((2, n))
    boot = _stratified_bootstrap({"t": m}, ["t"], 1000, 5)
    rng = np.random.default_rng(5)
    want = np.concatenate([m[:, rng.integers(0, n, size=(rows, n))].mean(axis=2).T for rows in (800, 200)])
    assert boot.shape == (1000, 2)
    np.testing.assert_allclose(boot, want, rtol=0, atol=1e-12)


def test_build_renders_self_contained_files(board_root, tmp_path):
    root = _copy(board_root, tmp_path)
    assert main(["leaderboard", "build", "--root", str(root)]) == 0
    d = root / SUITE
    md, page = (d / "README.md").read_text(), (d / "index.html").read_text()
    doc = json.loads((d / "leaderboard.json").read_text())
    assert doc["kind"] == "leaderboard" and doc["version"] == 1 and doc["task"] == SUITE
    assert "| 1 | **bm25** |" in md and "| 3 | **bm25-damaged** |" in md
    assert "Rank = 1 + the number of systems significantly better" in md and "Full Benchmark Avg." in md
    # No external requests: no URLs, no scripts, no external stylesheets or images.
    assert not re.search(r"https?://|<script|<link|<img|@import|url\(", page)
    assert page.count("<tr>") == 2 + 3 + 3  # two header rows, 3 systems, 3 pairs
    assert "bm25-damaged" in page and "Rank stability" in page


def test_tampered_submission_blocks_the_build(board_root, tmp_path):
    root = tmp_path / "lb"
    shutil.copytree(board_root, root)
    run = next((root / SUITE / "submissions" / "bm25" / "runs").iterdir())
    run.write_bytes(run.read_bytes()[:-10] + b"0000000000")
    with pytest.raises(SubmissionError, match=r"trec\.gz: truncated or corrupt gzip file"):
        build_boards(root)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SubmissionError, match="nothing to build"):
        build_boards(tmp_path / "empty")


def test_incomplete_submission_gets_no_rank(board_root, tmp_path):
    root = tmp_path / "lb"
    shutil.copytree(board_root, root)
    r = gapbench.run(TASKS[0], "bm25", k=20).run
    d = write_submission(root / SUITE / "submissions" / "half", system="half", description="one task.", suite=SUITE,
                         runs={TASKS[0]: r}, adapter={"name": "bm25", "config": {}}, contact="x@example.org", k=20)
    score_submission(d)
    board = build_board(_subs(root), SUITE)
    e = board.entry("half")
    assert e.rank is None and e.average is None and set(e.tasks) == {TASKS[0]}
    assert board.entries[-1].system == "half" and len(board.tests) == 3
    # its miss profile covers its one task; misses and wins are unique only among ranked systems, so it has none
    assert set(e.profile.tasks) == {TASKS[0]} and e.profile.n_queries == 1500
    assert e.profile.unique_misses is None and e.profile.tasks[TASKS[0]].unique_wins is None
    assert e.profile.misses == board.entry("bm25").profile.tasks[TASKS[0]].misses  # the same bm25 run
    assert all(x.system != "half" or x.profile.unique_wins is None for x in board.entries)
    assert board.entry("bm25").profile.unique_wins is not None


def test_export_mteb(board_root, tmp_path):
    sub = board_root / SUITE / "submissions" / "bm25-lucene"
    assert main(["leaderboard", "export-mteb", str(sub), "--out", str(tmp_path / "results")]) == 0
    # "rev1" is no commit: MTEB's folder for no revision; MTEB has no ImpliRet task, and the file name says so
    folder = tmp_path / "results" / "org__lucene-model" / "no_revision_available"
    doc = json.loads((folder / "NotInMTEB__impliret__unispeaker__wknow.json").read_text())
    scores = load_scores(sub)["tasks"][TASKS[0]]
    assert set(doc) == {"dataset_revision", "task_name", "mteb_version", "scores", "evaluation_time", "kg_co2_emissions",
                        "date", "gapbench"}
    assert doc["dataset_revision"] == gapbench.get_task(TASKS[0]).revision
    assert doc["task_name"] == "NotInMTEB__impliret__unispeaker__wknow" and doc["gapbench"]["task"] == TASKS[0]
    entry = doc["scores"]["test"][0]
    assert entry["ndcg_at_10"] == scores["measures"]["nDCG@10"] == entry["main_score"]
    assert entry["recall_at_100"] == scores["measures"]["R@100"]
    assert entry["hf_subset"] == "default" and entry["languages"] == ["eng-Latn"]
    assert json.loads((folder / "model_meta.json").read_text())["name"] == "org/lucene-model"
    # Lexical systems without a model go under gapbench/<system> and MTEB's no_revision_available.
    out = export_mteb(board_root / SUITE / "submissions" / "bm25", tmp_path / "r2")
    assert out[0].parent == tmp_path / "r2" / "gapbench__bm25" / "no_revision_available"
    assert [mteb_metric_name(m) for m in ("nDCG@10", "R@100", "RR@10", "P@1", "AP", "RR")] == [
        "ndcg_at_10", "recall_at_100", "mrr_at_10", "precision_at_1", "map", "mrr"]


def test_export_trec_round_trips(board_root, tmp_path):
    sub = board_root / SUITE / "submissions" / "bm25"
    assert main(["leaderboard", "export-trec", str(sub), "--out", str(tmp_path)]) == 0
    for t in TASKS:
        name = t.replace("/", "__")
        a = read_trec_run(tmp_path / f"{name}.trec")
        b = read_trec_run(sub / "runs" / f"{name}.trec.gz")
        assert a.to_dict() == b.to_dict() and len(a) == 1500


def test_committed_impliret_board(shipped_cached):
    """The seeded board: real bm25, bm25-lucene and dense submissions, scored; their inputs still hash the same."""
    d = REPO / "leaderboards" / "impliret"
    doc = json.loads((d / "leaderboard.json").read_text())
    assert {e["system"] for e in doc["entries"]} == {"bm25", "bm25-lucene", "dense"}
    for e in doc["entries"]:
        scores = load_scores(d / "submissions" / e["system"])  # verifies every input hash
        assert e["average"] == pytest.approx(scores["full_benchmark_avg"]["nDCG@10"], abs=1e-12)
    # ImpliRet's published BM25 Full Benchmark Avg. nDCG@10 is 12.24.
    bm25 = next(e for e in doc["entries"] if e["system"] == "bm25")
    assert bm25["average"] == pytest.approx(0.1224, abs=5e-5)
    sizes = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    assert sizes < 18_000_000


def _copy(board_root: Path, tmp_path: Path) -> Path:
    root = tmp_path / "lb"
    shutil.copytree(board_root, root, symlinks=True)
    return root


def test_forged_scores_json_is_refused_by_the_build(board_root, tmp_path, capsys):
    root = _copy(board_root, tmp_path)
    path = root / SUITE / "submissions" / "bm25-damaged" / "scores.json"
    doc = json.loads(path.read_text())
    pq = doc["tasks"][TASKS[1]]["per_query"]["nDCG@10"]
    q = next(q for q, v in pq.items() if v == 0.0)
    pq[q] = 1.0
    doc["tasks"][TASKS[1]]["measures"]["nDCG@10"] += 1.0 / len(pq)  # a careful forger keeps the mean consistent
    path.write_text(json.dumps(doc))
    before = (root / SUITE / "README.md").read_bytes() if (root / SUITE / "README.md").exists() else None
    assert main(["leaderboard", "build", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    sub = root / SUITE / "submissions" / "bm25-damaged"
    assert err.splitlines()[:2] == [f"gapbench: error: invalid submission {sub}: 3 errors in 1 file (exit 2)",
                                   f"{sub / 'scores.json'}:"]
    assert f"task {TASKS[1]}, measure nDCG@10, query {q} is 1.0 in scores.json, the runs give 0.0" in err
    assert f"task {TASKS[1]}, mean nDCG@10 is" in err
    after = (root / SUITE / "README.md").read_bytes() if (root / SUITE / "README.md").exists() else None
    assert after == before  # nothing rendered from a forged submission


def test_board_numbers_are_the_recomputed_ones(board_root, board):
    """The board's per-task means equal a fresh evaluation of the run files with the task's qrels."""
    from gapbench.evaluation.evaluation import evaluate

    for system in ("bm25", "bm25-lucene"):
        for t in TASKS:
            run = read_trec_run(board_root / SUITE / "submissions" / system / "runs" / f"{t.replace('/', '__')}.trec.gz")
            fresh = evaluate(run, gapbench.get_task(t).load().qrels, ["nDCG@10"]).means["nDCG@10"]
            assert board.entry(system).tasks[t].mean == fresh


HOSTILE = ("Fine | 9 | **forged** |\u00a0<script>alert(1)</script> [click](https://evil.example) `code` ~~x~~ $x$ "
           "&amp; _u_ \\")


def test_free_text_is_escaped_in_markdown_and_html(board_root, tmp_path):
    root = _copy(board_root, tmp_path)
    d = root / SUITE / "submissions" / "bm25"
    meta = json.loads((d / "submission.json").read_text())
    meta.update(description=HOSTILE, contact="<img src=x onerror=alert(1)> | row", url="https://example.org/code?a=1&b=2")
    meta["adapter"]["name"] = "bm25_x"
    (d / "submission.json").write_text(json.dumps(meta))
    score_submission(d)
    build_boards(root)
    md_text = (root / SUITE / "README.md").read_text()
    page = (root / SUITE / "index.html").read_text()
    table = [l for l in md_text.splitlines() if l.startswith("| ") and "**" in l and "---" not in l]
    assert len(table) == 3  # one row per system: nothing forged
    line = next(l for l in md_text.splitlines() if l.startswith("- **bm25**"))
    assert line == (
        "- **bm25**: Fine \\| 9 \\| \\*\\*forged\\*\\* \\|\u00a0\\<script\\>alert(1)\\</script\\> \\[click\\]"
        "(https://evil.example) \\`code\\` \\~\\~x\\~\\~ \\$x\\$ \\&amp; \\_u\\_ \\\\ Models: none (lexical). "
        f"Adapter: bm25\\_x. gapbench {gapbench.__version__}, scored {board_entry_date(root)}. "
        "Contact: \\<img src=x onerror=alert(1)\\> \\| row. <https://example.org/code?a=1&b=2>")
    assert "<script" not in page and "<img" not in page
    assert ("Fine | 9 | **forged** |\u00a0&lt;script&gt;alert(1)&lt;/script&gt; [click](https://evil.example) `code` "
            "~~x~~ $x$ &amp;amp; _u_ \\") in page
    assert "Contact: &lt;img src=x onerror=alert(1)&gt; | row." in page


def board_entry_date(root: Path) -> str:
    doc = json.loads((root / SUITE / "leaderboard.json").read_text())
    return next(e["date"] for e in doc["entries"] if e["system"] == "bm25")


@pytest.mark.parametrize("name", ["..", "../x", "/abs", "a/../../b"])
def test_export_mteb_refuses_model_names_that_leave_out(board_root, tmp_path, capsys, name):
    root = _copy(board_root, tmp_path)
    d = root / SUITE / "submissions" / "bm25-lucene"
    meta = json.loads((d / "submission.json").read_text())
    meta["models"][0]["name"] = name
    (d / "submission.json").write_text(json.dumps(meta))
    out = tmp_path / "box" / "out"
    assert main(["leaderboard", "export-mteb", str(d), "--out", str(out)]) == 2
    assert f"models[0].name ({name!r}) has characters that are not accepted" in capsys.readouterr().err
    assert not (tmp_path / "box").exists()


def test_export_paths_stay_under_out(board_root, tmp_path):
    from gapbench.products.exports import _out_path, _path_part
    from gapbench.schemas.base import MODEL_NAME

    out = tmp_path / "out"
    for part in ("..", ".", "", "a/b", "a\\b"):
        with pytest.raises(SubmissionError, match="must be a plain name"):
            _out_path(out, part)
    for name in ("..", "../x", "/abs", "a/../../b"):
        with pytest.raises(SubmissionError, match="cannot be a folder name"):
            _path_part(name, MODEL_NAME, "model name")
    assert _out_path(out, _path_part("org/m", MODEL_NAME, "model name"), "x.json") == out / "org__m" / "x.json"
    # A link planted under --out would carry the export elsewhere.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    os.symlink(elsewhere, out / "org__lucene-model")
    sub = board_root / SUITE / "submissions" / "bm25-lucene"
    with pytest.raises(SubmissionError, match="org__lucene-model: is a symbolic link; exports write only real files"):
        export_mteb(sub, out)
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    os.symlink(target, out / "impliret__unispeaker__wknow.trec")
    with pytest.raises(SubmissionError, match=r"wknow\.trec: is a symbolic link"):
        export_trec(sub, out)
    assert target.read_text() == "keep me" and list(elsewhere.iterdir()) == []


def test_build_refuses_a_linked_suite_folder(board_root, tmp_path, capsys):
    root = tmp_path / "lb"
    root.mkdir()
    os.symlink(board_root / SUITE, root / SUITE)
    assert main(["leaderboard", "build", "--root", str(root)]) == 2
    assert f"{root / SUITE}: is a symbolic link; boards are built only from real folders" in capsys.readouterr().err


@pytest.mark.parametrize("alpha, problem", [("nan", "a finite number"), ("0", "strictly between 0 and 1 (e.g. 0.05)"),
                                            ("1", "strictly between 0 and 1 (e.g. 0.05)"),
                                            ("-0.5", "strictly between 0 and 1 (e.g. 0.05)"),
                                            ("inf", "a finite number")])
def test_build_refuses_a_meaningless_alpha(board_root, capsys, alpha, problem):
    # gapbench.contract.Alpha's words, the same in every options class with an alpha
    assert main(["leaderboard", "build", "--root", str(board_root), "--alpha", alpha]) == 2
    assert f"--alpha must be {problem}, got {float(alpha)!r}." in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, message", [
    ("--resamples", "0", "--resamples must be greater than or equal to 1, got 0."),
    ("--permutations", "0", "--permutations must be greater than or equal to 1, got 0."),
    ("--seed", "-1", "--seed must be greater than or equal to 0, got -1."),
])
def test_build_names_the_flag_a_setting_refuses(board_root, capsys, flag, value, message):
    assert main(["leaderboard", "build", "--root", str(board_root), flag, value]) == 2
    assert message in capsys.readouterr().err


def test_options_refuse_by_setting_name():
    """The library names the setting (alpha), never the flag; every problem at once."""
    with pytest.raises(OptionsError) as caught:
        LeaderboardOptions(alpha=1.5, n_resamples=0)
    assert str(caught.value) == ("LeaderboardOptions: alpha must be strictly between 0 and 1 (e.g. 0.05), got 1.5; "
                                 "n_resamples must be greater than or equal to 1, got 0.")
    assert "--" not in str(caught.value)
    assert LeaderboardOptions() == LeaderboardOptions(alpha=0.05, n_resamples=1000, n_permutations=10_000, seed=0)


@pytest.mark.parametrize("path", [REPO / "leaderboards" / "impliret" / "leaderboard.json",
                                  REPO / "tests" / "fixtures" / "outputs_v0_1" / "leaderboard.json"])
def test_a_written_board_loads_and_writes_back_the_same_bytes(path):
    """leaderboard.json is the Leaderboard model: a committed or earlier-version file loads, renders, and dumps unchanged."""
    from gapbench.schemas.leaderboard import Leaderboard

    text = path.read_text(encoding="utf-8")
    board = Leaderboard.model_validate(json.loads(text))
    assert json.dumps(board.model_dump(mode="json", exclude_unset=True), indent=2) + "\n" == text
    bm25 = next(e for e in json.loads(text)["entries"] if e["system"] == "bm25")
    assert board.entry("bm25").average == bm25["average"]
    assert board.entry("bm25").adapter.config == bm25["adapter"]["config"]
    if path.parent.name == "impliret":  # the pages are the board's, and the reproduced reference rows after it
        from gapbench.products.leaderboard import reference_rows
        from gapbench.products.reproduce_render import reference_html, reference_markdown

        refs = reference_rows(path.parent, board.tasks)
        assert len(refs) == 6
        assert (path.parent / "README.md").read_text(encoding="utf-8") == (board.to_markdown() + "\n"
                                                                           + reference_markdown(refs))
        assert (path.parent / "index.html").read_text(encoding="utf-8") == board.to_html().replace(
            "</body>", reference_html(refs) + "</body>", 1)


def _entry(system: str, rank, means: dict, average) -> dict:
    return {"system": system, "description": "d.", "contact": "c@example.org", "url": None, "models": [],
            "adapter": {"name": "a", "config": {}}, "gapbench_version": "0", "date": "2026-01-01",
            "tasks": {t: {"mean": m, "ci95": [m - 0.01, m + 0.01]} for t, m in means.items()},
            "average": average, "average_ci95": None if average is None else [average - 0.005, average + 0.005],
            "rank": rank, "position": rank, "rank_stability": None if average is None else 0.734}


def test_board_tables_from_a_hand_built_board():
    """Both tables through gapbench.tables: a '|' in a name stays inside its cell (md_escape's character reference,
    issue 41), a '_' is left as it is; numbers right-aligned."""
    from gapbench.schemas.leaderboard import Leaderboard

    tasks = ("s/t_1", "other/t2")
    entries = (_entry("bm25", 1, {tasks[0]: 0.1, tasks[1]: 0.3}, 0.2),
               _entry("a|b", 2, {tasks[0]: 0.05, tasks[1]: 0.15}, 0.1),
               _entry("half", None, {tasks[0]: 0.3}, None))
    tests = [{"a": "bm25", "b": "a|b", "delta": 0.1, "p": 0.001, "p_holm": 0.002, "significant": True}]
    board = Leaderboard(kind="leaderboard", task="s", version=1, suite="s", tasks=list(tasks),
                  main_measures={t: "nDCG@10" for t in tasks}, alpha=0.05, n_resamples=1000, n_permutations=10_000,
                  seed=0, entries=list(entries), tests=tests)
    md = board.to_markdown().splitlines()
    # the average and its stability first, then the tasks (a board without miss profiles has no profile columns)
    start = md.index("| Rank | System | Full Benchmark Avg. [95% CI] | Rank stability | t_1 | other/t2 |")
    assert md[start + 1:start + 5] == [
        "|---|---|---:|---:|---:|---:|",
        "| 1 | **bm25** | **0.2000** [0.1950, 0.2050] | 73.4% | 0.1000 (0.090-0.110) | 0.3000 (0.290-0.310) |",
        "| 2 | **a&#124;b** | **0.1000** [0.0950, 0.1050] | 73.4% | 0.0500 (0.040-0.060) | 0.1500 (0.140-0.160) |",
        "| - | **half** | - | - | 0.3000 (0.290-0.310) | - |",
    ]
    start = md.index("| A | B | avg(A) - avg(B) | p (randomization) | p (Holm) | separable |")
    assert md[start + 1:start + 3] == ["|---|---|---:|---:|---:|---|",
                                       "| bm25 | a&#124;b | +0.1000 | 0.0010 | 0.0020 | yes |"]
    page = board.to_html()
    assert page.count("<tr>") == 2 + 3 + 1
    # compact CIs: the half-width beside the mean, the interval on hover (and under the average); no profile links
    assert ('<tr><td class="rank">2</td><td class="sys">a|b</td><td class="num avg" title="95% CI [0.0950, 0.1050]">'
            '<b>0.1000</b> <span class="pm">\u00b10.0050</span><div class="sub">[0.0950, 0.1050]</div></td>'
            '<td class="num" title="share of 1,000 bootstrap resamples">73.4%</td><td class="num" '
            'title="95% CI [0.0400, 0.0600]">0.0500 <span class="pm">'
            '\u00b10.010</span></td><td class="num" title="95% CI [0.1400, 0.1600]">0.1500 <span class="pm">'
            '\u00b10.010</span></td></tr>') in page
    assert '<tr><td class="rank">-</td><td class="sys">half</td><td class="num avg">-</td><td class="num">-</td>' in page
    assert "**" not in page and "<b>95% CIs:</b>" in page
    assert '<tr><td>bm25</td><td>a|b</td><td class="num">+0.1000</td>' in page


def test_a_hand_built_board_shows_its_minimum_detectable_effect_and_who_it_cannot_tell_apart():
    from gapbench.schemas.leaderboard import Leaderboard

    tasks = ("s/t_1", "other/t2")
    entries = [_entry("bm25", 1, {tasks[0]: 0.1, tasks[1]: 0.3}, 0.2),
               _entry("close", 1, {tasks[0]: 0.1, tasks[1]: 0.29}, 0.195)]
    tests = [{"a": "bm25", "b": "close", "delta": 0.005, "p": 0.3, "p_holm": 0.3, "significant": False}]
    mde = {"alpha": 0.05, "power": 0.8,
           "tasks": {tasks[0]: {"mde": 0.0213, "sd_diff": 0.2, "se": 0.0075, "df": 699.0, "n": 700, "n_pairs": 1,
                                "reason": None},
                     tasks[1]: {"mde": None, "sd_diff": 0.0, "se": 0.0, "df": 1.0, "n": 2, "n_pairs": 1,
                                "reason": "the per-query differences do not vary"}},
           "average": {"mde": None, "sd_diff": None, "se": None, "df": None, "n": 702, "n_pairs": 1,
                       "reason": "the per-query differences do not vary"}}
    board = Leaderboard(kind="leaderboard", task="s", version=1, suite="s", tasks=list(tasks),
                        main_measures={t: "nDCG@10" for t in tasks}, alpha=0.05, n_resamples=1000,
                        n_permutations=10_000, seed=0, entries=entries, tests=tests, mde=mde)
    md = board.to_markdown().splitlines()
    assert ("|  | Minimum detectable effect | the per-query differences do not vary |  | 0.0213 | the per-query "
            "differences do not vary |") in md
    assert "| bm25 | close | +0.0050 | 0.3000 | 0.3000 | no |" in md  # no MDE for the average: no verdict on it
    page = board.to_html()
    foot = page.split("<tfoot>")[1].split("</tfoot>")[0]
    assert ('<td class="num" title="paired test, alpha 0.05, power 0.8; sd of per-query differences 0.2000, pooled '
            'over 1 pair of ranked systems; n = 700 queries">0.0213</td>') in foot
    assert '<span class="sub">the per-query differences do not vary</span>' in foot
    # with an average MDE above the difference, the pair the test did not separate is indistinguishable here
    avg = {**mde, "average": {**mde["tasks"][tasks[0]], "sd_diff": None, "mde": 0.0151, "n": 702}}
    board = board.model_copy(update={"mde": type(board.mde).model_validate(avg)})
    assert ("| bm25 | close | +0.0050 | 0.3000 | 0.3000 | no: indistinguishable here (\\|difference\\| < MDE "
            "0.0151) |") in board.to_markdown().splitlines()
