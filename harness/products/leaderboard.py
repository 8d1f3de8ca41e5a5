"""Leaderboards rendered from scored submissions (the exports to MTEB's result format and to TREC runs are
:mod:`gapbench.products.mteb_export` and :mod:`gapbench.products.exports`).

Layout: ``leaderboards/<suite>/submissions/<system>/`` (see :mod:`gapbench.products.submissions`); :func:`build_boards`
writes ``leaderboards/<suite>/README.md``, ``index.html`` (self-contained: inline CSS, no scripts, no external
requests) and ``leaderboard.json``. The board is one model, :class:`gapbench.schemas.Leaderboard`:
built in memory, written as ``leaderboard.json`` and rendered. Its settings are one :class:`LeaderboardOptions`.

Every number on a board is recomputed from the submission's run files
(:func:`gapbench.products.submissions.scored_submission` validates the submission, re-scores its runs with the task's
qrels and refuses it when its ``scores.json`` differs). Every text taken from a submission is escaped for Markdown and
for HTML; exports write only under ``out``.

Ranking (the rule the README states):

- Each system's score on a task is the mean of the task's main measure over its queries; the **Full Benchmark Avg.**
  is the unweighted mean over the suite's tasks (systems missing a task get no average and no rank).
- For every pair of ranked systems, a paired randomization test (sign flips of per-query differences, each query
  weighted 1 / (tasks x queries of its task), so the statistic is exactly the difference of the averages) gives a
  p-value; the p-values of all pairs are Holm-corrected together.
- **rank = 1 + the number of systems significantly better** (Holm-adjusted p < alpha and a higher average). Systems
  that no one separates share a rank; ranks need not be consecutive.
- **95% CIs**: per task, the percentile bootstrap over queries stored in scores.json (gapbench.evaluation.stats); for
  the average, a bootstrap that resamples queries within each task (stratified), 1,000 resamples.
- **Rank stability**: the share of those bootstrap resamples (the same query draws for every system) in which a
  system keeps the position it has by mean (1 + the number of systems with a higher average).
- **Minimum detectable effect** (per task and for the average): the smallest true difference a paired test at the
  board's alpha finds with power 0.8, from the per-query differences of the ranked systems
  (:func:`gapbench.evaluation.stats.paired_mde`; the method is in docs/evaluation.md). Pairs closer than it are
  indistinguishable on the board's queries.
- **Evidence**: a statistic whose classes are too small to support it (:mod:`gapbench.evidence`) is null in
  leaderboard.json, with the reason and the counts, and the page shows the reason; every statistic of a row carries
  the number of queries behind it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from ..contract import Alpha, Options, Permutations, Resamples, Seed
from ..errors import SubmissionError
from ..evaluation.stats import percentile_interval, resample_blocks
from ..schemas.leaderboard import Leaderboard
from ..schemas.reproduce import MatrixRow, ReproduceReport
from ..suites import Suite
from .miss_profile import miss_profiles
from .submissions.validation_report import ValidationReport

ALPHA = 0.05


class LeaderboardOptions(Options):
    """The settings of a board: the significance level of the paired tests and the resampling of its statistics.

    ``alpha``: two systems are separable when the Holm-adjusted p-value of their paired randomization test is below
    it. ``n_resamples``: bootstrap resamples of the Full Benchmark Avg.'s CI and of rank stability. ``n_permutations``:
    sign flips of each paired test. ``seed``: of both."""

    alpha: Alpha = Field(ALPHA, description="Significance level of the paired tests after Holm correction.")
    n_resamples: Resamples = Field(1000, description="Bootstrap resamples of the average's CI and of rank stability.")
    n_permutations: Permutations = Field(10_000, description="Sign flips of each paired test.")
    seed: Seed = Field(0, description="Seed of the bootstrap and of the paired tests' sign flips (0 or more).")


# ---------------------------------------------------------------- building

def build_board(submissions: Iterable[str | os.PathLike], suite: str | Suite | None = None,
                options: LeaderboardOptions | None = None, data: Sequence[str | os.PathLike] = ()) -> Leaderboard:
    """A :class:`Leaderboard` from scored submission directories: every submission is validated and re-scored from its
    runs, and refused when its scores.json disagrees; the board shows only the recomputed numbers. ``suite``: a
    registered suite's name or a :class:`gapbench.suites.Suite` (a board of your own tasks); default the submissions'.
    ``data``: folders searched for a board's own tasks (:func:`gapbench.products.board_suites.locate`).

    Invalid submissions are refused together: the :class:`SubmissionError` lists every problem of every one (its
    ``reports`` attribute holds their validation reports)."""
    options = options or LeaderboardOptions()
    suite, scored = _scored_suite(submissions, suite, data)
    tasks, main = _board_tasks(suite, scored)
    complete = [s for s in scored if all(t in s["tasks"] for t in tasks)]
    mats = _query_matrices(complete, tasks, main)
    averages = np.array([np.mean([mats[t][i].mean() for t in tasks]) for i in range(len(complete))]) if complete \
        else np.array([])
    boot = _stratified_bootstrap(mats, tasks, options.n_resamples, options.seed) if complete else np.zeros((0, 0))
    position = [1 + int(np.sum(averages > averages[i])) for i in range(len(complete))]
    stability = [float(np.mean(1 + np.sum(boot > boot[:, [i]], axis=1) == position[i])) for i in range(len(complete))]
    lo, hi = percentile_interval(boot, 0.95) if complete else (np.zeros(0), np.zeros(0))
    tests, better = _pairwise_tests(complete, mats, tasks, averages, options.alpha, options.n_permutations,
                                    options.seed)
    profiles = miss_profiles(scored, tasks, main, [s["system"] for s in complete], options.n_resamples, options.seed)
    entries = []
    index = {id(s): i for i, s in enumerate(complete)}
    for s in scored:
        i = index.get(id(s))
        standing = None if i is None else {"average": float(averages[i]), "average_ci95": [float(lo[i]), float(hi[i])],
                                           "rank": 1 + better[i], "position": position[i],
                                           "rank_stability": stability[i],
                                           "n_queries": sum(mats[t].shape[1] for t in tasks)}
        entries.append(_board_entry(s, tasks, main, standing, profiles.get(s["system"])))
    entries.sort(key=lambda e: (e["rank"] is None, e["rank"] or 0, -(e["average"] or 0.0), e["system"]))
    tests.sort(key=lambda t: (-t["delta"], t["a"], t["b"]))
    return Leaderboard.model_validate({
        "kind": "leaderboard", "task": suite.name, "version": 1, "suite": suite.name, "tasks": list(tasks),
        "main_measures": main, "alpha": options.alpha, "n_resamples": options.n_resamples,
        "n_permutations": options.n_permutations, "seed": options.seed, "entries": entries, "tests": tests,
        "mde": _detectable(mats, tasks, options.alpha)})


def _scored_suite(submissions: Iterable[str | os.PathLike], suite: str | Suite | None,
                  data: Sequence[str | os.PathLike] = ()) -> tuple[Suite, list[dict]]:
    """The suite (given, or the first submission's) and every submission re-scored, all of that suite, names unique;
    every invalid or unscored submission is refused in one :class:`SubmissionError` (see :func:`invalid`)."""
    from ..suites import get_suite
    from .submissions.validate import validate_submission

    scored, bad = [], []
    for d in sorted(Path(s) for s in submissions):
        report = validate_submission(d, data=data)
        if report.ok and report.scores is None:
            report.error("scores.json", f"missing: the submission is not scored yet; run `gapbench submit score {d}`.")
        if not report.ok:
            bad.append(report)
            continue
        scored.append({**report.scored(), "_meta": report.submission(), "_report": report})
    if bad:
        raise invalid(bad)
    if not scored:
        raise SubmissionError("no scored submissions; add one under <root>/<suite>/submissions/<system>/ and run "
                              "`gapbench submit score` on it.")
    if suite is None:
        suite = scored[0]["_report"].suite or get_suite(scored[0]["suite"])
    elif isinstance(suite, str):
        suite = get_suite(suite)
    other = [s["system"] for s in scored if s["suite"] != suite.name]
    if other:
        raise SubmissionError(f"submissions {', '.join(other)} belong to another suite than {suite.name!r}; move "
                              "them.")
    names = [s["system"] for s in scored]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SubmissionError(f"system name {dup[0]!r} is used by two submissions; system names must be unique.")
    return suite, scored


def invalid(reports: Sequence[ValidationReport]) -> SubmissionError:
    """One error for the invalid submissions of a board: its message is their errors on one line (the library's
    contract); ``reports`` keeps their validation reports, which the command line prints one error per line."""
    text = "; ".join(r.one_line().rstrip(".") for r in reports) + "."
    return SubmissionError(text if len(reports) == 1 else f"{len(reports)} invalid submissions: {text}",
                           reports=reports)


def _board_tasks(suite: Suite, scored: Sequence[dict]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The suite's tasks that some submission scored, in suite order, and each one's main measure."""
    tasks = tuple(suite.tasks)
    main: dict[str, str] = {}
    for t in tasks:
        for s in scored:
            if t in s["tasks"]:
                main.setdefault(t, s["tasks"][t]["main_measure"])
    return tuple(t for t in tasks if t in main), main


def _query_matrices(complete: Sequence[dict], tasks: Sequence[str], main: Mapping[str, str]) -> dict[str, np.ndarray]:
    """Per task, the systems x queries matrix of the main measure, on one shared query order."""
    mats: dict[str, np.ndarray] = {}
    for t in tasks:
        if not complete:
            break
        ref = complete[0]["tasks"][t]
        qids = list(ref["per_query"][main[t]])
        for s in complete[1:]:
            other_t = s["tasks"][t]
            if other_t["fingerprints"] != ref["fingerprints"] or set(other_t["per_query"][main[t]]) != set(qids):
                raise SubmissionError(f"{s['system']} and {complete[0]['system']} were scored on different data for "
                                      f"{t} (fingerprints or query sets differ); re-score both with this gapbench.")
        mats[t] = np.array([[s["tasks"][t]["per_query"][main[t]][q] for q in qids] for s in complete], dtype=np.float64)
    return mats


def _pairwise_tests(complete: Sequence[dict], mats: Mapping[str, np.ndarray], tasks: Sequence[str],
                    averages: np.ndarray, alpha: float, n_permutations: int,
                    seed: int) -> tuple[list[dict], dict[int, int]]:
    """Randomization tests of every pair (Holm-corrected), and per system the number it beats significantly."""
    from ..evaluation.stats import holm, randomization_test

    # Weighted per-query vectors: mean(a' - b') equals avg(a) - avg(b).
    if complete:
        n_total = sum(mats[t].shape[1] for t in tasks)
        weights = np.concatenate([np.full(mats[t].shape[1], n_total / (len(tasks) * mats[t].shape[1])) for t in tasks])
        stacked = np.concatenate([mats[t] for t in tasks], axis=1) * weights
    pairs = [(i, j) for i in range(len(complete)) for j in range(i + 1, len(complete))]
    pvals = [_kept_p(stacked[i], stacked[j], n_permutations, seed, randomization_test) for i, j in pairs]
    padj = holm(pvals) if pvals else []
    better = {i: 0 for i in range(len(complete))}
    tests = []
    for (i, j), p, pa in zip(pairs, pvals, padj):
        sig = pa < alpha and averages[i] != averages[j]
        if sig:
            better[j if averages[i] > averages[j] else i] += 1
        a, b = (i, j) if averages[i] >= averages[j] else (j, i)
        tests.append({"a": complete[a]["system"], "b": complete[b]["system"], "delta": float(averages[a] - averages[b]),
                      "p": float(p), "p_holm": float(pa), "significant": bool(sig)})
    return tests, better


def _kept_p(a: np.ndarray, b: np.ndarray, n_permutations: int, seed: int, test: Any) -> float:
    """``test(a, b)``'s p-value (the paired randomization test), kept in gapbench's submissions cache under the two
    weighted per-query vectors' bytes, the test's settings and the scoring code (:mod:`.submissions.score_cache`), so
    a rebuild tests only the pairs that a new or changed submission makes."""
    import hashlib

    from .submissions.score_cache import cache_read, cache_write, keyed_path

    kept = keyed_path("pairs", hashlib.sha256(a.tobytes()).hexdigest(), hashlib.sha256(b.tobytes()).hexdigest(),
                      a.size, n_permutations, seed)
    p = cache_read(kept)
    if isinstance(p, float):
        return p
    p = float(test(a, b, n_permutations=n_permutations, seed=seed))
    cache_write(kept, p)
    return p


def _board_entry(s: Mapping[str, Any], tasks: Sequence[str], main: Mapping[str, str],
                 standing: Mapping[str, Any] | None, profile: Mapping[str, Any] | None = None) -> dict:
    """One row of the board; ``standing`` (average, CI, rank, ...) is None for a system missing a task; ``profile``
    is its miss profile (:mod:`gapbench.products.miss_profile`)."""
    meta = s["_meta"]
    return {
        "system": s["system"], "description": meta.get("description", ""), "contact": meta.get("contact", ""),
        "url": meta.get("url"), "models": meta.get("models", []), "adapter": meta.get("adapter", {}),
        "gapbench_version": s["manifest"]["gapbench_version"], "date": s["manifest"]["date"][:10],
        "tasks": {t: {"mean": s["tasks"][t]["measures"][main[t]], "ci95": list(s["tasks"][t]["ci95"][main[t]]),
                      "n": len(s["tasks"][t]["per_query"][main[t]])} for t in tasks if t in s["tasks"]},
        **(standing or dict.fromkeys(("average", "average_ci95", "rank", "position", "rank_stability"))),
        **({"profile": profile} if profile is not None else {}),
    }


def _detectable(mats: Mapping[str, np.ndarray], tasks: Sequence[str], alpha: float) -> dict:
    """The minimum detectable effect of the main measure per task and of the Full Benchmark Avg., from the per-query
    differences of every pair of ranked systems (:func:`gapbench.evaluation.stats.paired_mde`, pooled over the pairs;
    :func:`~gapbench.evaluation.stats.averaged_mde` for the average), at the board's alpha and power 0.8."""
    from ..evaluation.stats import POWER, averaged_mde, paired_mde

    per_task = {}
    for t in tasks:
        m = mats.get(t, np.zeros((0, 0)))
        per_task[t] = paired_mde([m[i] - m[j] for i in range(m.shape[0]) for j in range(i + 1, m.shape[0])], alpha,
                                 POWER)
        per_task[t]["n"] = int(m.shape[1])
    return {"alpha": alpha, "power": POWER, "tasks": per_task, "average": averaged_mde(list(per_task.values()), alpha,
                                                                                       POWER)}


def _stratified_bootstrap(mats: dict[str, np.ndarray], tasks: Sequence[str], n_resamples: int, seed: int) -> np.ndarray:
    """resamples x systems: the Full Benchmark Avg. with queries resampled within each task (the same draws for every
    system), each task's queries drawn through :func:`gapbench.evaluation.stats.resample_blocks`."""
    rng = np.random.default_rng(seed)
    n_sys = next(iter(mats.values())).shape[0]
    total = np.zeros((n_resamples, n_sys))
    for t in tasks:
        m = mats[t]
        for rows, idx in resample_blocks(m.shape[1], n_resamples, rng):
            for s in range(n_sys):
                total[rows, s] += m[s][idx].mean(axis=1)
    return total / len(tasks)


REFERENCE_FILE = "reference.json"  # a suite's reproduced reference rows: matrix.json of `gapbench reproduce`


def reference_rows(suite_dir: str | os.PathLike, tasks: Iterable[str]) -> list[MatrixRow]:
    """The reproduced reference rows a board shows beside its submissions: the rows of ``<suite>/reference.json``
    (the ``matrix.json`` that ``gapbench reproduce -o DIR`` writes, validated by its schema) whose task is on the
    board, in the file's order, except those ``not comparable``; none when the suite has no such file."""
    from ..schemas import load_file

    path = Path(suite_dir) / REFERENCE_FILE
    if not path.exists():
        return []
    if path.is_symlink() or not path.is_file():
        raise SubmissionError(f"{path}: is not a regular file; boards read only real files. Replace it with the "
                              "matrix.json of `gapbench reproduce -o DIR`.")
    wanted = set(tasks)
    matrix = load_file(path, "reproduce")
    if not isinstance(matrix, ReproduceReport):  # load_file validates against the schema named
        raise SubmissionError(f"{path}: is not a reproduction matrix; replace it with the matrix.json of "
                              "`gapbench reproduce -o DIR`.")
    # a row run on a copy that is not the published set (--ungraded) is no reference for anything
    return [row for row in matrix.rows if row.task in wanted and row.grade != "not comparable"]


def write_board(board: Leaderboard, directory: str | os.PathLike, references: Sequence = ()) -> list[Path]:
    """Write the board's README.md, index.html and leaderboard.json into ``directory``, and a page per profiled
    system, ``systems/<system>.html`` (pages of systems no longer on the board are removed). ``references`` (rows of
    a reproduction matrix, :func:`reference_rows`) are shown after the ranking: the papers' baselines, reproduced."""
    from ..files import atomic_writer
    from .board_page import system_page
    from .reproduce_render import reference_html, reference_markdown

    directory = Path(directory)
    page = board.to_html()
    if references:
        page = page.replace("</body>", reference_html(references) + "</body>", 1)
    # exclude_unset: an adapter keeps only the fields its submission gave
    document = board.model_dump(mode="json", exclude_unset=True)
    files = [("README.md", board.to_markdown() + ("\n" + reference_markdown(references) if references else "")),
             ("index.html", page), ("leaderboard.json", json.dumps(document, indent=2) + "\n")]
    pages = {f"{e.system}.html": system_page(board, e) for e in board.entries if e.profile is not None}
    systems = directory / "systems"
    if systems.is_symlink():
        raise SubmissionError(f"{systems}: is a symbolic link; boards write only real folders. Remove it.")
    if systems.is_dir():
        for old in sorted(systems.glob("*.html")):
            if old.name not in pages and old.is_file() and not old.is_symlink():
                old.unlink()
    files += [(f"systems/{name}", text) for name, text in sorted(pages.items())]
    out = []
    for name, text in files:
        if (directory / name).is_symlink():
            raise SubmissionError(f"{directory / name}: is a symbolic link; boards write only real files. Remove it.")
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(directory / name) as fh:
            fh.write(text)
        out.append(directory / name)
    return out


def build_boards(root: str | os.PathLike = "leaderboards", options: LeaderboardOptions | None = None,
                 data: Sequence[str | os.PathLike] = ()) -> list[Path]:
    """Render every ``<root>/<suite>/`` that has scored submissions; returns the files written. A suite folder is a
    registered suite's (``leaderboards/impliret``) or a board of your own tasks (it holds suite.toml, written by
    ``gapbench leaderboard init``); ``data``: folders searched for such a board's tasks. Nothing is written unless
    every board builds; the invalid submissions of all boards are refused together."""
    from ..suites import is_suite
    from .board_suites import SUITE_FILE, is_suite_folder, read_suite_file

    root = Path(root)
    if not root.is_dir():
        raise SubmissionError(f"{root}: no such folder; give the leaderboards folder, which holds "
                              "<suite>/submissions/<system>/.")
    boards: list[tuple[Path, Leaderboard]] = []
    bad: list[ValidationReport] = []
    for suite_dir in sorted(p for p in root.iterdir() if (p / "submissions").is_dir()):
        # A link would make the board read submissions, and write its files, outside the root.
        for p in (suite_dir, suite_dir / "submissions"):
            if p.is_symlink():
                raise SubmissionError(f"{p}: is a symbolic link; boards are built only from real folders under "
                                      f"{root}. Replace the link with the folder.")
        if is_suite_folder(suite_dir):
            suite: Suite | str = read_suite_file(suite_dir, data)
        elif is_suite(suite_dir.name):
            suite = suite_dir.name
        else:
            raise SubmissionError(f"{suite_dir}: {suite_dir.name!r} is not a registered suite and the folder holds no "
                                  f"{SUITE_FILE}; rename the folder, or make it a board of your own tasks with "
                                  f"`gapbench leaderboard init {suite_dir} --task DIR ...`.")
        subs = [p for p in sorted((suite_dir / "submissions").iterdir()) if p.is_dir() or p.is_symlink()]
        if not subs:
            continue
        try:
            boards.append((suite_dir, build_board(subs, suite, options, data)))
        except SubmissionError as exc:
            if not exc.reports:
                raise
            bad += exc.reports
    if bad:
        raise invalid(bad)
    written = []
    for suite_dir, board in boards:
        written += write_board(board, suite_dir, reference_rows(suite_dir, board.tasks))
    if not written:
        raise SubmissionError(f"{root}: no <suite>/submissions/<system>/ folders found; nothing to build.")
    return written
