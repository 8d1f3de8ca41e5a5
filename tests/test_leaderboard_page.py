"""The board page and every row's miss profile (issue 28), on real submissions: bm25, bm25-lucene and a bm25 whose
gold documents of every second hit query are pushed to the bottom of its list (tests/planted.py), on two ImpliRet
sets; and the committed ImpliRet board, its system pages and its layout in Chromium at 1280 px."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

import gapbench
from gapbench.formats import read_trec_run
from gapbench.products.leaderboard import build_boards
from gapbench.schemas.leaderboard import Leaderboard
from gapbench.products.submissions.validate import load_scores
from gapbench.schemas import validate

from test_leaderboard import SUITE, TASKS, _setup, _subs, board_root  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
IMPLIRET = REPO / "leaderboards" / "impliret"


@pytest.fixture(scope="module")
def profiled(mini_board):
    """The board ``build_board`` made of the three submissions with default settings (tests/fx_boards.py)."""
    return Leaderboard.model_validate_json((mini_board / "board.json").read_text())


def _per_query(root: Path, system: str, task: str, measure: str) -> dict[str, float]:
    return load_scores(root / SUITE / "submissions" / system)["tasks"][task]["per_query"][measure]


def test_misses_unique_misses_wins_and_depth_from_the_scores(board_root, profiled):  # noqa: F811
    """Misses are the queries whose R@10 is 0 in the recomputed scores; unique ones are counted across the three."""
    systems = ("bm25", "bm25-damaged", "bm25-lucene")
    hits = {s: {t: {q: v > 0 for q, v in _per_query(board_root, s, t, "R@10").items()} for t in TASKS}
            for s in systems}
    for s in systems:
        p = profiled.entry(s).profile
        total = 0
        for t in TASKS:
            tp, h = p.tasks[t], hits[s][t]
            assert tp.n_queries == len(h) == 1500
            assert tp.misses == pytest.approx(sum(not v for v in h.values()) / len(h), abs=1e-12)
            others = [o for o in systems if o != s]
            assert tp.unique_misses == sum(1 for q in h if not h[q] and all(hits[o][t][q] for o in others))
            assert tp.unique_wins == sum(1 for q in h if h[q] and not any(hits[o][t][q] for o in others))
            r100 = _per_query(board_root, s, t, "R@100")
            assert tp.recall_100 == pytest.approx(np.mean(list(r100.values())), abs=1e-12)
            assert tp.never_found == pytest.approx(np.mean([v == 0 for v in r100.values()]), abs=1e-12)
            total += sum(not v for v in h.values())
        assert p.misses == pytest.approx(total / 3000, abs=1e-12) and p.n_queries == 3000
        assert p.unique_misses == sum(p.tasks[t].unique_misses for t in TASKS)
    bm25, damaged = profiled.entry("bm25").profile, profiled.entry("bm25-damaged").profile
    # The damaged run loses half of bm25's hits and gains none: it never wins alone, bm25 never misses alone ...
    assert damaged.unique_wins == 0 and bm25.unique_misses == 0 and damaged.unique_misses > 100
    # ... and its gold documents are still in its list (at the bottom): a ranking failure, not a retrieval failure.
    assert damaged.misses > bm25.misses + 0.05
    assert damaged.recall_100 == bm25.recall_100 and damaged.never_found == bm25.never_found


def _brute_auc(weak: np.ndarray, values: np.ndarray) -> float:
    """P(a good retrieval's top-1 score > a weak one's), ties half: every pair counted."""
    good, bad = values[weak == 0], values[weak == 1]
    diff = good[:, None] - bad[None, :]
    return float(np.mean((diff > 0) + 0.5 * (diff == 0)))


def test_the_weak_signal_is_the_signals_analysis_on_the_runs_own_scores(board_root, profiled):  # noqa: F811
    """On these two ImpliRet sets the top-1 score barely separates: every AUC's interval is as wide as its distance
    from 0.5, so the evidence rule holds each back, naming the AUC the signals analysis computes (and, on the
    committed board, the AUCs it shows are checked in test_the_committed_board_has_a_profile_and_a_page_per_system)."""
    from gapbench.analyses.signals.definitions import compute_signals, weak_labels
    from gapbench.analyses.signals.signals_report import analyse
    from gapbench.analyses.signals.signal_stats import separation

    for s in ("bm25", "bm25-lucene"):
        for t in TASKS:
            run = read_trec_run(board_root / SUITE / "submissions" / s / "runs" / f"{t.replace('/', '__')}.trec.gz")
            qrels = gapbench.get_task(t).load().qrels
            qids = list(_per_query(board_root, s, t, "nDCG@10"))
            y = weak_labels(run, qrels, qids)
            scores = np.array([run[q][0][1] for q in qids])
            sig = profiled.entry(s).profile.tasks[t].signal
            assert (sig.signal, sig.n, sig.n_weak) == ("max_score", 1500, int(y.sum()))
            brute = max(_brute_auc(y, scores), 1 - _brute_auc(y, scores))
            assert brute == pytest.approx(separation(y, scores, "lower_is_weaker")[0], abs=1e-12)
            # about 1,000 weak and 500 good retrievals: held back by its interval, not by its counts, on the board and
            # in the signals analysis alike, both naming that AUC
            ref = analyse(compute_signals({s: run}, qids, signals=("max_score",)), y).model_dump()["signals"]
            assert (sig.separation, sig.ci95, sig.orientation) == (None, None, None)
            assert sig.reason.startswith("its 95% interval") and f"({brute:.3f} - 0.5 = " in sig.reason
            assert ref["max_score"]["separation"] is None and (ref["max_score"]["n"], ref["max_score"]["n_weak"]) == (
                1500, int(y.sum()))
            assert ref["max_score"]["withheld"].startswith("its 95% interval")
            assert f"({brute:.3f} - 0.5 = " in ref["max_score"]["withheld"]
        pooled = profiled.entry(s).profile.signal
        assert (pooled.n, pooled.separation) == (3000, None) and pooled.reason.startswith("its 95% interval")


def test_miss_examples_are_queries_others_get(board_root, profiled):  # noqa: F811
    damaged = profiled.entry("bm25-damaged").profile
    assert sorted(ex.task for ex in damaged.examples) == sorted(TASKS)  # one per task, each task has planted misses
    for ex in damaged.examples:
        assert _per_query(board_root, "bm25-damaged", ex.task, "R@10")[ex.query_id] == 0.0
        assert ex.others_hit == ["bm25", "bm25-lucene"]  # the planted misses are queries both others get
        for other in ex.others_hit:
            assert _per_query(board_root, other, ex.task, "R@10")[ex.query_id] > 0
        run = read_trec_run(board_root / SUITE / "submissions" / "bm25-damaged" / "runs" /
                            f"{ex.task.replace('/', '__')}.trec.gz")
        assert [(d.doc_id, d.rank, d.score) for d in ex.top] == [(d, i + 1, s) for i, (d, s)
                                                                 in enumerate(run[ex.query_id][:3])]
        data = gapbench.get_task(ex.task).load()
        assert data.qrels[ex.query_id][ex.gold.doc_id] > 0
        assert ex.gold.rank == 20  # sunk below the last of its 20 documents, still retrieved
        text = " ".join(data.queries[ex.query_id].text.split())
        assert ex.query == text if len(text) <= 280 else (ex.query.endswith("\u2026")
                                                          and text.startswith(ex.query[:-1]))


def test_the_page_puts_the_average_first_and_renders_markup(board_root, tmp_path):  # noqa: F811
    import shutil

    root = tmp_path / "lb"
    shutil.copytree(board_root, root)
    written = build_boards(root)
    d = root / SUITE
    page = (d / "index.html").read_text()
    assert "**" not in page and "<b>Rank = 1 + the number of systems significantly better.</b>" in page
    heads = re.findall(r"<th[^>]*>(.*?)</th>", page.split("</thead>")[0])
    plain = [re.sub(r"<[^>]+>", " ", h).split()[0] for h in heads]
    assert plain[:8] == ["Rank", "System", "Full", "Rank", "Misses@10", "Only", "R@100", "Weak-signal"]
    assert plain[8:] == list(TASKS)  # full names: these tasks are not named after the test suite
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)|<script|<link|<img|@import|url\(", page)
    for system in ("bm25", "bm25-lucene", "bm25-damaged"):
        assert f'<a href="systems/{system}.html">{system}</a>' in page
        sub = (d / "systems" / f"{system}.html").read_text()
        assert d / "systems" / f"{system}.html" in written
        assert "<svg" in sub and sub.count("<figure>") == 2 and "**" not in sub and "<script" not in sub
    damaged = (d / "systems" / "bm25-damaged.html").read_text()
    assert damaged.count('<div class="ex">') >= 1 and "Gold <code>" in damaged
    doc = json.loads((d / "leaderboard.json").read_text())
    board = validate("leaderboard", doc)  # the profiles follow the schema
    assert board.entry("bm25").profile is not None
    assert "## Where systems miss" in (d / "README.md").read_text()
    # a page of a system no longer on the board goes away with it
    (d / "systems" / "gone.html").write_text("old")
    build_boards(root)
    assert not (d / "systems" / "gone.html").exists()


def test_an_old_board_without_profiles_renders_without_their_columns():
    text = (REPO / "tests" / "fixtures" / "outputs_v0_1" / "leaderboard.json").read_text()
    board = Leaderboard.model_validate(json.loads(text))
    assert all(e.profile is None for e in board.entries)
    page = board.to_html()
    assert "Misses@10" not in page and "systems/" not in page and "**" not in page
    assert json.dumps(board.model_dump(mode="json", exclude_unset=True), indent=2) + "\n" == text


def test_the_committed_board_has_a_profile_and_a_page_per_system(shipped_cached):
    from gapbench.evidence import reaches_chance

    doc = json.loads((IMPLIRET / "leaderboard.json").read_text())
    board = validate("leaderboard", doc)
    page = (IMPLIRET / "index.html").read_text()
    assert "**" not in page and "`" not in page  # no Markdown left unrendered
    assert page.index("Full Benchmark Avg.") < page.index("multispeaker/arithmetic")
    for e in board.entries:
        p = e.profile
        assert p is not None and p.n_queries == 9000 and set(p.tasks) == set(board.tasks)
        assert p.unique_misses is not None and p.unique_wins is not None and p.signal is not None
        for sig in (p.signal, *(tp.signal for tp in p.tasks.values())):
            # shown only where the evidence rule lets it: then with an interval narrower than its distance from 0.5
            assert sig is not None and (sig.separation is None) == (sig.reason is not None)
            if sig.separation is not None:
                assert sig.ci95[0] < sig.separation < sig.ci95[1] and not reaches_chance(sig.separation, *sig.ci95)
        sub = (IMPLIRET / "systems" / f"{e.system}.html").read_text()
        assert "**" not in sub and "`" not in sub and sub.count('<div class="ex">') == 3
        assert f'href="systems/{e.system}.html"' in page
        scores = load_scores(IMPLIRET / "submissions" / e.system)
        for t, tp in p.tasks.items():
            r10 = scores["tasks"][t]["per_query"]["R@10"]
            assert tp.misses == pytest.approx(np.mean([v == 0 for v in r10.values()]), abs=1e-12)
            assert tp.recall_100 == pytest.approx(scores["tasks"][t]["measures"]["R@100"], abs=1e-12)


def test_the_committed_board_shows_the_reproduced_reference_rows():
    from gapbench.products.reproduce import load_matrix

    published = {row.id: row for row in load_matrix() if row.task.startswith("impliret/")}
    rows = validate("reproduce", json.loads((IMPLIRET / "reference.json").read_text())).rows
    assert [r.id for r in rows] == list(published) and len(rows) == 6
    page, readme = (IMPLIRET / "index.html").read_text(), (IMPLIRET / "README.md").read_text()
    assert page.index("Paired tests") < page.index("Reference rows: the papers' baselines, reproduced")
    for r in rows:
        # the matrix's published value and source, gapbench's value within the row's tolerance, graded OK
        assert (r.published, r.source, r.tolerance) == (published[r.id].published, published[r.id].source,
                                                       published[r.id].tolerance)
        assert r.grade == "OK" and abs(r.measured - r.published) <= r.tolerance and r.run_dir is None
        line = f"| `{r.id}` | `bm25` | nDCG@10 | {r.published:.4f} | {r.measured:.4f} |"
        assert line in readme
        assert f"<td><code>{r.id}</code></td>" in page or r.id in page


def test_a_reference_file_that_is_a_link_is_refused(tmp_path):
    import shutil

    from gapbench.products.leaderboard import reference_rows
    from gapbench.errors import SubmissionError

    shutil.copy(IMPLIRET / "reference.json", tmp_path / "elsewhere.json")
    suite = tmp_path / "impliret"
    suite.mkdir()
    assert reference_rows(suite, ["impliret/unispeaker/wknow"]) == []  # no file: no rows
    (suite / "reference.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(SubmissionError, match=r"reference\.json: is not a regular file"):
        reference_rows(suite, ["impliret/unispeaker/wknow"])
    (suite / "reference.json").unlink()
    shutil.copy(tmp_path / "elsewhere.json", suite / "reference.json")
    assert [r.task for r in reference_rows(suite, ["impliret/unispeaker/wknow"])] == ["impliret/unispeaker/wknow"]


def test_the_committed_board_rebuilds_byte_for_byte(shipped_board):
    """The committed submissions and reference.json alone, built by ``build_boards`` with a cold cache (the session's
    one build of them, tests/fx_boards.py), give the committed board's every file."""
    made = set(json.loads((shipped_board / "written.json").read_text()))
    assert made == {"README.md", "index.html", "leaderboard.json", "systems/bm25.html", "systems/bm25-lucene.html",
                    "systems/dense.html"}
    for rel in sorted(made):
        assert (shipped_board / "lb" / "impliret" / rel).read_bytes() == (IMPLIRET / rel).read_bytes(), rel


@pytest.mark.slow
def test_the_board_fits_1280_px_in_chromium(tmp_path):
    """At 1280 px the page does not overflow the window, the average column is fully visible without scrolling, the
    system column stays put when the table scrolls, and no page makes a request other than itself."""
    from test_report_browser import Browser, foreign

    b = Browser(Path(tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path)))
    try:
        b.send("Emulation.setDeviceMetricsOverride", session=True, width=1280, height=1400, deviceScaleFactor=1,
               mobile=False)
        url = (IMPLIRET / "index.html").resolve().as_uri()
        b.load(url)
        assert b.problems() == [] and foreign(b.requests(), url) == []
        layout = b.evaluate("""(() => {
            const box = document.querySelector('.scroll'), avg = document.querySelector('th.avg');
            const r = avg.getBoundingClientRect(), s = box.getBoundingClientRect();
            const cells = Array.from(document.querySelectorAll('tbody td.avg'));
            return {page: document.documentElement.scrollWidth, win: window.innerWidth,
                    avgLeft: r.left, avgRight: r.right, boxLeft: s.left, boxRight: s.right,
                    avgTop: r.top, winH: window.innerHeight,
                    sameLine: cells.map(c => {  // the mean and its +- overlap vertically: one line
                        const b = c.querySelector('b').getBoundingClientRect();
                        const pm = c.querySelector('.pm').getBoundingClientRect();
                        return pm.top < b.bottom && b.top < pm.bottom && pm.left >= b.right; }),
                    ciHeights: cells.map(c => c.querySelector('.sub').getBoundingClientRect().height)};
        })()""")
        assert layout["page"] <= layout["win"] == 1280
        assert layout["boxLeft"] <= layout["avgLeft"] < layout["avgRight"] <= min(layout["boxRight"], 1280)
        assert 0 <= layout["avgTop"] < layout["winH"]
        # neither the number and its +- nor the interval below them wrap inside the cell
        assert layout["sameLine"] == [True] * 3 and all(0 < h < 24 for h in layout["ciHeights"])
        moved = b.evaluate("""(() => {
            const box = document.querySelector('.scroll'), sys = document.querySelector('td.sys');
            const before = sys.getBoundingClientRect().left;
            box.scrollLeft = box.scrollWidth;
            return [before, sys.getBoundingClientRect().left, box.scrollLeft];
        })()""")
        assert moved[0] == moved[1]  # sticky: the system column stays where it was while the table scrolls
        allowed = {url}
        for system in ("bm25", "bm25-lucene", "dense"):
            page = (IMPLIRET / "systems" / f"{system}.html").resolve().as_uri()
            allowed.add(page)
            b.load(page)
            assert b.problems() == [] and [u for u in foreign(b.requests(), url) if u not in allowed] == []
            assert b.evaluate("document.documentElement.scrollWidth") <= 1280
            assert b.evaluate("document.querySelectorAll('svg').length") == 6
    finally:
        b.close()
