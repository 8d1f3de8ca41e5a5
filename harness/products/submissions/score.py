"""Scoring a valid submission against the registry: each run evaluated with its task's qrels and measures, with
bootstrap CIs, into the ``scores.json`` document; and the check of a stored ``scores.json`` against that
recomputation (every field that differs is named: task, measure and query).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import SubmissionError
from ...schemas import ISO_DATETIME, MAX_RESAMPLES, PACKAGE, VERSION, text_problem
from .files import MAX_SCORES_BYTES, Refused, json_type, read_json
from .runs import check_run_file
from .score_cache import cache_path, cache_read, cache_write
from .validation_report import ValidationReport, task_data

SHOWN_DIFFERENCES = 5  # between scores.json and its recomputation; the rest are counted
SCORE_TOLERANCE = 1e-9  # recomputed vs stored values; pytrec_eval is deterministic, this only absorbs libm noise


def check_bootstrap(n_resamples: Any, seed: Any) -> str | None:
    """Why a bootstrap setting of scores.json cannot be used, or None."""
    if type(n_resamples) is not int or not 1 <= n_resamples <= MAX_RESAMPLES:
        return f"n_resamples {n_resamples!r:.40} is not an integer from 1 to {MAX_RESAMPLES:,}"
    if type(seed) is not int or not 0 <= seed < 2**63:
        return f"seed {seed!r:.40} is not an integer from 0 to 2**63 - 1"
    return None


def _score_task(report: ValidationReport, name: str, task, data, n_resamples: int, seed: int) -> dict:
    """One task's entry of scores.json, evaluated from the validated run with the task's qrels."""
    from ...evaluation.evaluation import evaluate
    from ...types import Run

    meta = report.submission()
    rel = meta["tasks"][name]["run"]
    ranking = report.rankings.get(name)
    if ranking is None:  # validated from the cache: parse it again, uncached
        again = ValidationReport(report.directory)
        ranking, _ = check_run_file(report.runs[name], rel, task, again, use_cache=False)
        if ranking is None:  # the file changed since it was validated
            raise SubmissionError(again.one_line())
    res = evaluate(Run(ranking, meta["system"]), data.qrels, task.measures, task=task.name,
                   n_resamples=n_resamples, seed=seed)
    return {
        "revision": task.revision,
        "fingerprints": {"corpus": data.corpus.fingerprint, "queries": data.queries.fingerprint,
                         "qrels": data.qrels.fingerprint},
        "run": rel,
        "run_sha256": report.hashes[rel],
        "main_measure": task.main_measure,
        "measures": dict(res.means),
        "ci95": {m: list(res.ci[m]) for m in res.measures},
        "n_queries": res.n_queries,
        "n_missing": res.n_missing,
        "n_dropped": res.n_dropped,
        "per_query": {m: dict(v) for m, v in res.per_query.items()},
    }


def compute_scores(report: ValidationReport, *, n_resamples: int = 1000, seed: int = 0) -> dict:
    """The scores.json document of a valid submission, recomputed from its runs (manifest without date and package
    versions, which describe the scoring machine rather than the submission). A task whose run bytes were scored
    before by this same code, on the same task data, is taken from gapbench's cache."""
    from ...suites import get_suite

    meta = report.submission()
    inputs = {"submission.json": report.hashes["submission.json"]}
    tasks_out: dict[str, dict] = {}
    for name in meta["tasks"]:
        task = report.task(name)
        data = task_data(task, report)
        rel = meta["tasks"][name]["run"]
        inputs[rel] = report.hashes[rel]
        kept = cache_path("scores", task, data, inputs[rel], n_resamples, seed)
        entry = cache_read(kept)
        if not isinstance(entry, dict) or entry.get("run") != rel:
            entry = _score_task(report, name, task, data, n_resamples, seed)
            cache_write(kept, entry)
        tasks_out[task.name] = entry
    suite = report.suite or get_suite(meta["suite"])
    out: dict[str, Any] = {
        "kind": "submission_scores", "task": suite.name, "version": 1,
        "system": meta["system"], "suite": suite.name,
        "manifest": {"n_resamples": n_resamples, "seed": seed, "inputs": inputs},
        "tasks": tasks_out,
    }
    if all(t in tasks_out for t in suite.tasks):
        measures = [m for m in tasks_out[suite.tasks[0]]["measures"]
                    if all(m in tasks_out[t]["measures"] for t in suite.tasks)]
        out["full_benchmark_avg"] = {m: sum(tasks_out[t]["measures"][m] for t in suite.tasks) / len(suite.tasks)
                                     for m in measures}
    return out



def _label(key: Any) -> str:
    return key if isinstance(key, str) and re.fullmatch(r"[\w./@:+=-]{1,80}", key) else repr(key)[:80]


def _where(path: tuple) -> str:
    """A difference's position in words: task, measure and query where there are ones."""
    if len(path) >= 2 and path[0] == "tasks":
        rest = path[2:]
        head = f"task {_label(path[1])}"
        if len(rest) == 3 and rest[0] == "per_query":
            return f"{head}, measure {_label(rest[1])}, query {_label(rest[2])}"
        if len(rest) == 2 and rest[0] == "measures":
            return f"{head}, mean {_label(rest[1])}"
        if len(rest) == 3 and rest[0] == "ci95" and rest[2] in (0, 1):
            return f"{head}, {('lower', 'upper')[rest[2]]} end of the 95% CI of {_label(rest[1])}"
        return head + "".join(f", {_label(p)}" for p in rest)
    if len(path) == 3 and path[:2] == ("manifest", "inputs"):
        return f"manifest.inputs[{_label(path[2])}]"
    return ".".join(_label(p) for p in path) or "the whole file"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _differences(stored: Any, fresh: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """(position, what differs) for every place where the stored document departs from the recomputed one."""
    if isinstance(fresh, dict):
        if not isinstance(stored, dict):
            yield path, f"is a {json_type(stored)}, expected an object"
            return
        for key, value in fresh.items():
            if key not in stored:
                yield path + (key,), "is missing"
            else:
                yield from _differences(stored[key], value, path + (key,))
        for key in stored:
            if key not in fresh:
                yield path + (key,), "is not produced by a recomputation (an entry the runs do not give)"
    elif isinstance(fresh, list):
        if not isinstance(stored, list) or len(stored) != len(fresh):
            yield path, f"is {_show(stored)} in scores.json, the runs give {_show(fresh)}"
            return
        for i, (a, b) in enumerate(zip(stored, fresh)):
            yield from _differences(a, b, path + (i,))
    elif isinstance(fresh, float):
        if (isinstance(stored, bool) or not isinstance(stored, (int, float))
                or not math.isclose(stored, fresh, rel_tol=0.0, abs_tol=SCORE_TOLERANCE)):
            yield path, f"is {_show(stored)} in scores.json, the runs give {fresh!r}"
    elif type(stored) is not type(fresh) or stored != fresh:
        if path[:2] == ("manifest", "inputs") or path[-1:] == ("run_sha256",):
            yield path, f"is {_show(stored)}: the file changed since it was scored (it now hashes to {fresh})"
        else:
            yield path, f"is {_show(stored)} in scores.json, the runs give {_show(fresh)}"


def check_stored_scores(directory: Path, report: ValidationReport) -> None:
    """Recompute scores.json from the validated runs and report every field that differs (the first few, then a
    count); ``report.scores`` holds the recomputation when nothing differs."""
    src = "scores.json"
    try:
        stored, _ = read_json(directory / src, MAX_SCORES_BYTES)
    except Refused as exc:
        report.error(src, exc.args[0], exc.args[1] if len(exc.args) > 1 else None)
        return
    fix = f"re-create it with `gapbench submit score {directory}` (never edit it by hand)"
    if not isinstance(stored, dict) or stored.get("kind") != "submission_scores" or stored.get("version") != 1:
        report.error(src, f"is not a gapbench scores.json (kind 'submission_scores', version 1); {fix}.")
        return
    manifest = stored.get("manifest")
    if not isinstance(manifest, dict):
        report.error(src, f"manifest is a {json_type(manifest)}, expected an object; {fix}.")
        return
    why = check_bootstrap(manifest.get("n_resamples"), manifest.get("seed"))
    if why:
        report.error(src, f"manifest {why}; {fix}.")
        return
    # The scoring machine's own description is kept as stored once it is well-formed (it is shown, not computed).
    for key, pattern in (("gapbench_version", VERSION), ("date", ISO_DATETIME)):
        value = manifest.get(key)
        if not isinstance(value, str) or text_problem(value, pattern, 40):
            report.error(src, f"manifest.{key} {value!r:.60} is malformed; {fix}.")
            return
    versions = manifest.get("versions")
    if not isinstance(versions, dict) or len(versions) > 100 or not all(
            isinstance(v, str) and not text_problem(k, PACKAGE, 64) and not text_problem(v, VERSION, 64)
            for k, v in versions.items()):
        report.error(src, f"manifest.versions must map package names to versions; {fix}.")
        return
    fresh = compute_scores(report, n_resamples=manifest["n_resamples"], seed=manifest["seed"])
    fresh["manifest"] = {key: manifest[key] for key in ("gapbench_version", "date", "versions")} | fresh["manifest"]
    diffs = _differences(stored, fresh)
    shown = 0
    total = 0
    for path, what in diffs:
        total += 1
        if shown < SHOWN_DIFFERENCES:
            report.error(src, f"does not match a recomputation from the runs: {_where(path)} {what}")
            shown += 1
    if total:
        count = f"{total:,} values in all differ from the recomputation; " if total > shown else ""
        report.error(src, f"{count}boards show only scores recomputed from the runs and refuse a scores.json that "
                          f"disagrees: {fix}.")
        return
    report.scores = fresh
