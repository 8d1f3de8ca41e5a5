"""Leaderboards rendered from scored submissions, and exports to MTEB's result format and to TREC runs.

Layout: ``leaderboards/<suite>/submissions/<system>/`` (see :mod:`gapbench.products.submissions`); :func:`build_boards`
writes ``leaderboards/<suite>/README.md``, ``index.html`` (self-contained: inline CSS, no scripts, no external
requests) and ``leaderboard.json``.

Every number on a board is recomputed from the submission's run files (:func:`gapbench.products.submissions.scored_submission`
validates the submission, re-scores its runs with the task's qrels and refuses it when its ``scores.json`` differs).
Every text taken from a submission is escaped for Markdown and for HTML; exports write only under ``--out``.

Ranking (the rule the README states):

- Each system's score on a task is the mean of the task's main measure over its queries; the **Full Benchmark Avg.**
  is the unweighted mean over the suite's tasks (systems missing a task get no average and no rank).
- For every pair of ranked systems, a paired randomization test (sign flips of per-query differences, each query
  weighted 1 / (tasks x queries of its task), so the statistic is exactly the difference of the averages) gives a
  p-value; the p-values of all pairs are Holm-corrected together.
- **rank = 1 + the number of systems significantly better** (Holm-adjusted p < alpha and a higher average). Systems
  that no one separates share a rank; ranks need not be consecutive.
- **95% CIs**: per task, the percentile bootstrap over queries stored in scores.json (gapbench.evaluation.stats); for the average,
  a bootstrap that resamples queries within each task (stratified), 1,000 resamples.
- **Rank stability**: the share of those bootstrap resamples (the same query draws for every system) in which a
  system keeps the position it has by mean (1 + the number of systems with a higher average).

``leaderboard.json`` (kind ``leaderboard``, version 1)::

    {"kind": "leaderboard", "task": <suite>, "version": 1, "suite", "tasks": [...], "main_measures": {task: m},
     "alpha", "n_resamples", "n_permutations", "seed",
     "entries": [{"system", "description", "contact", "url", "models", "adapter", "gapbench_version", "date",
                  "tasks": {task: {"mean", "ci95": [lo, hi]}}, "average": float|null, "average_ci95": [lo, hi]|null,
                  "rank": int|null, "position": int|null, "rank_stability": float|null}],
     "tests": [{"a", "b", "delta", "p", "p_holm", "significant"}]}
"""

from __future__ import annotations

import html
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import ConfigError, GapbenchError
from ..tables import Table
from .submissions import (
    MODEL_NAME, REVISION, URL, Refused, SubmissionError, inside, open_run_text, run_file_name, scored_submission,
)

ALPHA = 0.05
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&$])")
_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")


def md(text: object) -> str:
    """Text from a submission as literal Markdown: one line, with every character that starts markup escaped (a '|'
    cannot end a table cell, '<' cannot open HTML, '[' cannot open a link)."""
    return _MD_SPECIAL.sub(r"\\\1", _LINE_BREAKS.sub(" ", str(text)))


@dataclass(frozen=True)
class Board:
    suite: str
    tasks: tuple[str, ...]
    main_measures: dict[str, str]
    entries: tuple[dict, ...]
    tests: tuple[dict, ...]
    alpha: float = ALPHA
    n_resamples: int = 1000
    n_permutations: int = 10_000
    seed: int = 0

    def entry(self, system: str) -> dict:
        for e in self.entries:
            if e["system"] == system:
                return e
        raise GapbenchError(f"no system {system!r} on the {self.suite} board; systems: "
                            f"{', '.join(e['system'] for e in self.entries)}.")

    def to_dict(self) -> dict:
        return {"kind": "leaderboard", "task": self.suite, "version": 1, "suite": self.suite, "tasks": list(self.tasks),
                "main_measures": dict(self.main_measures), "alpha": self.alpha, "n_resamples": self.n_resamples,
                "n_permutations": self.n_permutations, "seed": self.seed, "entries": [dict(e) for e in self.entries],
                "tests": [dict(t) for t in self.tests]}

    # ------------------------------------------------------------ rendering
    def _measure_label(self) -> str:
        ms = sorted(set(self.main_measures.values()))
        return ms[0] if len(ms) == 1 else "main measure"

    def _standings(self, strong: Callable[[str], str] = str) -> Table:
        """The ranking, a row per entry; ``strong`` marks the system and its average (bold in Markdown)."""
        short = [t.split("/", 1)[1] if t.startswith(self.suite + "/") else t for t in self.tasks]
        head = ["Rank", "System", *short, "Full Benchmark Avg. [95% CI]", "Rank stability"]
        rows = []
        for e in self.entries:
            cells = [str(e["rank"]) if e["rank"] is not None else "-", strong(e["system"])]
            for t in self.tasks:
                v = e["tasks"].get(t)
                cells.append(f"{v['mean']:.4f} ({v['ci95'][0]:.3f}-{v['ci95'][1]:.3f})" if v else "-")
            avg, ci = e["average"], e["average_ci95"]
            cells.append(f"{strong(format(avg, '.4f'))} [{ci[0]:.4f}, {ci[1]:.4f}]" if avg is not None else "-")
            cells.append(f"{e['rank_stability']:.1%}" if e["rank_stability"] is not None else "-")
            rows.append(cells)
        return Table(head, rows, align="ll" + "r" * (len(head) - 2))

    def _tests_table(self) -> Table:
        rows = [[t["a"], t["b"], f"{t['delta']:+.4f}", f"{t['p']:.4f}", f"{t['p_holm']:.4f}",
                 "yes" if t["significant"] else "no"] for t in self.tests]
        return Table(["A", "B", "avg(A) - avg(B)", "p (randomization)", "p (Holm)", "separable"], rows, align="llrrrl")

    def to_markdown(self) -> str:
        label = self._measure_label()
        lines = [
            f"# {md(self.suite)} leaderboard",
            "",
            f"{md(label)} per task ({len(self.tasks)} tasks) and the Full Benchmark Avg. (unweighted mean over tasks), "
            f"from {len(self.entries)} scored submissions under `submissions/`. Built by `gapbench leaderboard build`; "
            "do not edit by hand.",
            "",
            self._standings(lambda text: f"**{text}**").markdown(),
        ]
        lines += ["", "## How the ranks are made", "", *_RULES(self), ""]
        if self.tests:
            lines += ["## Paired tests (Full Benchmark Avg.)", "", self._tests_table().markdown(), ""]
        lines += ["## Submissions", ""]
        for e in self.entries:
            models = ", ".join(f"{m['name']} @ {m['revision']}" for m in e["models"]) or "none (lexical)"
            url = e.get("url")
            lines.append(f"- **{md(e['system'])}**: {md(e['description'])} Models: {md(models)}. "
                         f"Adapter: {md(e['adapter'].get('name'))}. gapbench {md(e['gapbench_version'])}, scored "
                         f"{md(e['date'])}. Contact: {md(e['contact'])}."
                         # An autolink is literal text for Markdown; URL's character set has no '<', '>' or space.
                         + (f" <{url}>" if isinstance(url, str) and URL.fullmatch(url) else ""))
        lines += ["", "Task names: " + ", ".join(md(t) for t in self.tasks) + ".", ""]
        return "\n".join(lines)

    def to_html(self) -> str:
        esc = html.escape
        subs = "".join(
            f"<li><b>{esc(e['system'])}</b>: {esc(e['description'])} Models: "
            f"{esc(', '.join(m['name'] + ' @ ' + m['revision'] for m in e['models']) or 'none (lexical)')}. "
            f"Adapter: {esc(str(e['adapter'].get('name')))}. gapbench {esc(e['gapbench_version'])}, scored {esc(e['date'])}. "
            f"Contact: {esc(e['contact'])}.</li>"
            for e in self.entries
        )
        rules = "".join(f"<li>{esc(r[2:])}</li>" for r in _RULES(self))
        return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(self.suite)} leaderboard</title>
<style>
body{{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#222}}
table{{border-collapse:collapse;margin:1rem 0}}th,td{{border-bottom:1px solid #ddd;padding:.35rem .6rem;text-align:left}}
th{{background:#f4f4f4}}td.num{{text-align:right}}
.board td:nth-child(2),.board td:nth-last-child(2),.tests td:nth-child(-n+2){{font-weight:600}}
</style></head><body>
<h1>{esc(self.suite)} leaderboard</h1>
<p>{esc(self._measure_label())} per task and the Full Benchmark Avg. (unweighted mean over {len(self.tasks)} tasks).</p>
<div class="board">{self._standings().html()}</div>
<h2>How the ranks are made</h2><ul>{rules}</ul>
<h2>Paired tests (Full Benchmark Avg.)</h2>
<div class="tests">{self._tests_table().html()}</div>
<h2>Submissions</h2><ul>{subs}</ul>
</body></html>
"""


def _RULES(board: Board) -> list[str]:
    return [
        f"- **Rank = 1 + the number of systems significantly better.** Two systems are separable when a paired "
        f"randomization test ({board.n_permutations:,} sign flips of per-query differences, each query weighted by "
        f"1 / (tasks x queries in its task), so the statistic is the difference of the Full Benchmark Avg.) has a "
        f"Holm-adjusted p-value below {board.alpha}, the correction running over all pairs of ranked systems. "
        "Systems that nobody separates share a rank, so ranks need not be consecutive.",
        f"- **95% CIs**: per task, the percentile bootstrap over queries ({board.n_resamples:,} resamples, stored in "
        "each scores.json); for the average, a bootstrap that resamples queries within each task.",
        "- **Rank stability**: the share of those bootstrap resamples (the same query draws for every system) in which "
        "the system keeps its position by mean (1 + the number of systems with a higher average).",
        "- A submission that misses a task of the suite gets no average and no rank.",
    ]


# ---------------------------------------------------------------- building

def build_board(
    submissions: Iterable[str | os.PathLike], suite: str | None = None, *, alpha: float = ALPHA,
    n_resamples: int = 1000, n_permutations: int = 10_000, seed: int = 0,
) -> Board:
    """A :class:`Board` from scored submission directories: every submission is validated and re-scored from its runs,
    and refused when its scores.json disagrees; the board shows only the recomputed numbers."""
    _check_board_settings(alpha, n_resamples, n_permutations, seed)
    suite, scored = _scored_suite(submissions, suite)
    tasks, main = _board_tasks(suite, scored)
    complete = [s for s in scored if all(t in s["tasks"] for t in tasks)]
    mats = _query_matrices(complete, tasks, main)
    averages = np.array([np.mean([mats[t][i].mean() for t in tasks]) for i in range(len(complete))]) if complete else np.array([])
    boot = _stratified_bootstrap(mats, tasks, n_resamples, seed) if complete else np.zeros((0, 0))
    position = [1 + int(np.sum(averages > averages[i])) for i in range(len(complete))]
    stability = [float(np.mean(1 + np.sum(boot > boot[:, [i]], axis=1) == position[i])) for i in range(len(complete))]
    ci = [tuple(float(x) for x in np.quantile(boot[:, i], [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2])) for i in range(len(complete))]
    tests, better = _pairwise_tests(complete, mats, tasks, averages, alpha, n_permutations, seed)
    entries = []
    index = {id(s): i for i, s in enumerate(complete)}
    for s in scored:
        i = index.get(id(s))
        standing = None if i is None else {"average": float(averages[i]), "average_ci95": list(ci[i]),
                                           "rank": 1 + better[i], "position": position[i],
                                           "rank_stability": stability[i]}
        entries.append(_board_entry(s, tasks, main, standing))
    entries.sort(key=lambda e: (e["rank"] is None, e["rank"] or 0, -(e["average"] or 0.0), e["system"]))
    tests.sort(key=lambda t: (-t["delta"], t["a"], t["b"]))
    return Board(suite, tasks, main, tuple(entries), tuple(tests), alpha, n_resamples, n_permutations, seed)


def _check_board_settings(alpha: float, n_resamples: int, n_permutations: int, seed: int) -> None:
    """Refuse a significance level or resampling setting before any submission is scored."""
    if not 0.0 < alpha < 1.0:  # also false for NaN
        raise ConfigError(f"--alpha is {alpha}; give a significance level between 0 and 1, e.g. 0.05.")
    for name, value, low in (("n_resamples", n_resamples, 1), ("n_permutations", n_permutations, 1), ("seed", seed, 0)):
        if not low <= value < 2**63:
            raise ConfigError(f"{name} is {value}; give an integer of at least {low}.")


def _scored_suite(submissions: Iterable[str | os.PathLike], suite: str | None) -> tuple[str, list[dict]]:
    """The suite (given, or the first submission's) and every submission re-scored, all of that suite, names unique."""
    scored = []
    for d in sorted(Path(s) for s in submissions):
        report = scored_submission(d)
        scored.append({**report.scores, "_meta": report.meta})
    if not scored:
        raise SubmissionError("no scored submissions; add one under <root>/<suite>/submissions/<system>/ and run "
                              "`gapbench submit score` on it.")
    suite = suite or scored[0]["suite"]
    other = [s["system"] for s in scored if s["suite"] != suite]
    if other:
        raise SubmissionError(f"submissions {', '.join(other)} belong to another suite than {suite!r}; move them.")
    names = [s["system"] for s in scored]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SubmissionError(f"system name {dup[0]!r} is used by two submissions; system names must be unique.")
    return suite, scored


def _board_tasks(suite: str, scored: Sequence[dict]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The suite's tasks that some submission scored, in suite order, and each one's main measure."""
    from ..suites import get_suite

    tasks = tuple(get_suite(suite).tasks)
    main = {}
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
                raise SubmissionError(f"{s['system']} and {complete[0]['system']} were scored on different data for {t} "
                                      "(fingerprints or query sets differ); re-score both with this gapbench.")
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
    pvals = [randomization_test(stacked[i], stacked[j], n_permutations=n_permutations, seed=seed) for i, j in pairs]
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


def _board_entry(s: Mapping[str, Any], tasks: Sequence[str], main: Mapping[str, str],
                 standing: Mapping[str, Any] | None) -> dict:
    """One row of the board; ``standing`` (average, CI, rank, ...) is None for a system missing a task."""
    meta = s["_meta"]
    return {
        "system": s["system"], "description": meta.get("description", ""), "contact": meta.get("contact", ""),
        "url": meta.get("url"), "models": meta.get("models", []), "adapter": meta.get("adapter", {}),
        "gapbench_version": s["manifest"]["gapbench_version"], "date": s["manifest"]["date"][:10],
        "tasks": {t: {"mean": s["tasks"][t]["measures"][main[t]], "ci95": list(s["tasks"][t]["ci95"][main[t]])}
                  for t in tasks if t in s["tasks"]},
        **(standing or dict.fromkeys(("average", "average_ci95", "rank", "position", "rank_stability"))),
    }


def _stratified_bootstrap(mats: dict[str, np.ndarray], tasks: Sequence[str], n_resamples: int, seed: int) -> np.ndarray:
    """resamples x systems: the Full Benchmark Avg. with queries resampled within each task (same draws for all)."""
    rng = np.random.default_rng(seed)
    n_sys = next(iter(mats.values())).shape[0]
    total = np.zeros((n_resamples, n_sys))
    for t in tasks:
        m = mats[t]
        idx = rng.integers(0, m.shape[1], size=(n_resamples, m.shape[1]))
        for s in range(n_sys):
            total[:, s] += m[s][idx].mean(axis=1)
    return total / len(tasks)


def write_board(board: Board, directory: str | os.PathLike) -> list[Path]:
    from ..files import atomic_writer

    directory = Path(directory)
    out = []
    for name, text in (("README.md", board.to_markdown()), ("index.html", board.to_html()),
                       ("leaderboard.json", json.dumps(board.to_dict(), indent=2) + "\n")):
        with atomic_writer(directory / name) as fh:
            fh.write(text)
        out.append(directory / name)
    return out


def build_boards(root: str | os.PathLike = "leaderboards", **kwargs) -> list[Path]:
    """Render every ``<root>/<suite>/`` that has scored submissions; returns the files written."""
    from ..suites import is_suite

    root = Path(root)
    if not root.is_dir():
        raise SubmissionError(f"{root}: no such folder; give --root pointing at the leaderboards folder.")
    written = []
    for suite_dir in sorted(p for p in root.iterdir() if (p / "submissions").is_dir()):
        # A link would make the board read submissions, and write its files, outside --root.
        for p in (suite_dir, suite_dir / "submissions"):
            if p.is_symlink():
                raise SubmissionError(f"{p}: is a symbolic link; boards are built only from real folders under "
                                      f"{root}. Replace the link with the folder.")
        if not is_suite(suite_dir.name):
            raise SubmissionError(f"{suite_dir}: {suite_dir.name!r} is not a registered suite; rename the folder.")
        subs = [p for p in sorted((suite_dir / "submissions").iterdir()) if p.is_dir() or p.is_symlink()]
        if not subs:
            continue
        written += write_board(build_board(subs, suite_dir.name, **kwargs), suite_dir)
    if not written:
        raise SubmissionError(f"{root}: no <suite>/submissions/<system>/ folders found; nothing to build.")
    return written


# ---------------------------------------------------------------- exports

def mteb_metric_name(measure: str) -> str:
    """gapbench (ir-measures) name -> MTEB score key: nDCG@10 -> ndcg_at_10, R@100 -> recall_at_100, RR@10 -> mrr_at_10."""
    base, _, cut = measure.partition("@")
    key = {"nDCG": "ndcg", "R": "recall", "RR": "mrr", "P": "precision", "AP": "map", "Success": "success"}.get(
        base, base.lower())
    return f"{key}_at_{cut}" if cut else key


def _out_path(out: str | os.PathLike, *parts: str) -> Path:
    """``out / parts...`` for names taken from data: each part one plain name (no '/', '..', link), the result under out."""
    out = Path(out)
    path = out
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\\" in part or "\x00" in part:
            raise SubmissionError(f"{part!r:.80} cannot name a file or folder under {out}; it must be a plain name.")
        path = path / part
        if path.is_symlink():
            raise SubmissionError(f"{path}: is a symbolic link; exports write only real files under {out}. Remove it.")
    if not path.resolve().is_relative_to(out.resolve()):
        raise SubmissionError(f"{path}: resolves outside {out}; exports write only under --out.")
    return path


def _path_part(text: str, pattern: re.Pattern, what: str) -> str:
    """A model name or revision as one folder name ('/' -> '__'), refused unless it matches its validated form."""
    if not isinstance(text, str) or not pattern.fullmatch(text):
        raise SubmissionError(f"{what} {text!r:.80} cannot be a folder name; give letters, digits and . _ - with '/' "
                              "between parts.")
    return text.replace("/", "__")


def export_mteb(
    submission: str | os.PathLike, out: str | os.PathLike, *, split: str = "test", languages: Sequence[str] = ("eng-Latn",),
    hf_subset: str = "default",
) -> list[Path]:
    """Write ``<out>/<org__model>/<revision>/<task>.json`` in MTEB's result format, one file per scored task.

    Fields follow MTEB's TaskResult: ``dataset_revision``, ``task_name``, ``mteb_version`` (null: not produced by
    MTEB), ``scores: {split: [{main_score, ndcg_at_10, ..., hf_subset, languages}]}``, ``evaluation_time`` (null),
    ``kg_co2_emissions`` (null). A ``model_meta.json`` (name, revision) sits beside them. The scores are recomputed
    from the runs; the folder names come from validated model names and never leave ``out``.
    """
    from ..files import atomic_writer

    report = scored_submission(submission)
    scores, meta = report.scores, report.meta
    models = meta.get("models") or []
    name = models[0]["name"] if models else meta["system"]
    revision = models[0]["revision"] if models else "no_revision_available"
    folder = _out_path(out, _path_part(name, MODEL_NAME, "model name"), _path_part(revision, REVISION, "model revision"))
    written = []
    for task, t in scores["tasks"].items():
        entry = {mteb_metric_name(m): float(v) for m, v in t["measures"].items()}
        entry.update({"main_score": float(t["measures"][t["main_measure"]]), "hf_subset": hf_subset,
                      "languages": list(languages)})
        result = {"dataset_revision": t["revision"], "task_name": task, "mteb_version": None,
                  "scores": {split: [entry]}, "evaluation_time": None, "kg_co2_emissions": None}
        path = _out_path(folder, f"{run_file_name(task)}.json")
        with atomic_writer(path) as fh:
            json.dump(result, fh, indent=2)
        written.append(path)
    path = _out_path(folder, "model_meta.json")
    with atomic_writer(path) as fh:
        json.dump({"name": name, "revision": revision, "framework": ["gapbench"],
                   "gapbench_system": meta["system"], "gapbench_adapter": meta.get("adapter", {})}, fh, indent=2)
    written.append(path)
    return written


def export_trec(submission: str | os.PathLike, out: str | os.PathLike) -> list[Path]:
    """Write each task's run of a validated, scored submission as plain TREC text, ``<out>/<task>.trec``.

    Only the run paths of submission.json are read (validated to be ``runs/<task>.trec[.gz]`` inside the submission);
    paths named in scores.json are never opened."""
    from ..files import atomic_writer

    submission = Path(submission)
    report = scored_submission(submission)
    written = []
    for task, entry in report.meta["tasks"].items():
        path = _out_path(out, f"{run_file_name(task)}.trec")
        try:
            src = open_run_text(inside(submission, entry["run"]))
        except Refused as exc:
            raise SubmissionError(f"{submission / entry['run']}: {exc.args[0]}") from None
        with src, atomic_writer(path) as dst:
            for line in src:
                dst.write(line)
        written.append(path)
    return written
