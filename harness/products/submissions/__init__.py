"""Leaderboard submissions: data only, validated before anything reads them, scored into ``scores.json``.

A submission is a directory holding exactly::

    submission.json
    runs/<task name with "/" replaced by "__">.trec      (or .trec.gz), one TREC run per task
    scores.json                                         (written by `gapbench submit score`, never by hand)

Nothing else is accepted: no code (.py, .sh, executables), no symbolic links, no hidden files, no other folders.

**Trust.** A submission comes from a stranger, so nothing in it is believed that can be recomputed:

- Every number a board shows is recomputed from the validated run files with the task's own qrels (pytrec_eval, a few
  tenths of a second per task). ``scores.json`` is a receipt: `gapbench submit validate` and `gapbench leaderboard
  build` recompute it and refuse a submission whose ``scores.json`` differs from the recomputation in any field (per
  query value, mean, CI, input hash, run path, ...), naming the task, measure and query. A public board refuses a
  forged receipt rather than silently fixing it, so the submitter has to re-score and the stored file never
  disagrees with the board.
- The only paths ever opened are ``submission.json``, ``scores.json`` and the run paths of ``submission.json``, which
  must be exactly ``runs/<task>.trec[.gz]``; every path is checked to stay inside the submission (no ``..``, no
  absolute path, no symbolic link on the way, opened with ``O_NOFOLLOW``). Paths named in ``scores.json`` are only
  compared, never opened.
- Names that end up in boards and file names are validated at the door (``system``: 1-64 letters, digits and
  ``._+-``; model names and revisions: the same characters with ``/`` between parts; free text: one line without
  control characters, length-capped; ``url``: http(s) without spaces, quotes or brackets), and every free-text field
  is escaped again when a board is rendered.
- Work is bounded by the input's size: run files are capped at 25 MB as stored and 100 MB once gunzipped (counted
  while streaming, so a gzip bomb stops at the cap), JSON at 1 MB (submission.json) or 50 MB (scores.json) and 32
  levels of nesting, and id checks are set lookups; "did you mean" suggestions are made for the first few unknown
  ids only, then counted.
- Speed: a clean run is read in one regex pass, and what a run's bytes gave (its validation, its scores for a
  seed and resample count) is kept in gapbench's cache keyed by the run's sha256, the task's revision and data
  fingerprints, and the checking and scoring code itself, so rebuilding a board re-reads only new runs.

``submission.json`` (``format_version`` 1; unknown fields are errors)::

    {
      "format_version": 1,
      "system": "bm25-lucene",                          # unique name on the board: letters, digits, . _ + -
      "description": "Anserini's flat BM25 ...",
      "suite": "impliret",                              # a registered suite; every task must belong to it
      "gapbench_version": "0.1.0",                      # the gapbench that produced the runs
      "models": [{"name": "sentence-transformers/all-MiniLM-L6-v2", "revision": "..."}],   # [] for lexical systems
      "adapter": {"name": "dense", "config": {...}, "fingerprint": "..."},   # fingerprint optional
      "contact": "name <email> or a URL",
      "tasks": {
        "impliret/multispeaker/wknow": {
          "revision": "github:...@ddd14afc...",         # must equal the registered task's revision
          "run": "runs/impliret__multispeaker__wknow.trec.gz",
          "sha256": "<sha256 of the run file's bytes>"
        }
      },
      "url": "optional link to code or paper", "date": "optional ISO date", "k": 100   # optional
    }

``scores.json`` (kind ``submission_scores``, version 1)::

    {"kind": "submission_scores", "task": <suite>, "version": 1, "system": ..., "suite": ...,
     "manifest": {"gapbench_version", "date", "versions": {package: version}, "n_resamples", "seed",
                  "inputs": {"submission.json": sha256, "runs/...": sha256}},
     "tasks": {task: {"revision", "fingerprints": {"corpus", "queries", "qrels"}, "run": path, "run_sha256",
                      "main_measure", "measures": {m: mean}, "ci95": {m: [lo, hi]}, "n_queries", "n_missing",
                      "n_dropped", "per_query": {m: {query_id: value}}}},
     "full_benchmark_avg": {m: mean over the suite's tasks} (only when every task of the suite is present)}

>>> report = validate_submission("leaderboards/impliret/submissions/bm25")  # doctest: +SKIP
>>> report.ok, str(report)  # doctest: +SKIP
"""

from __future__ import annotations

from ...errors import ConfigError, GapbenchError, SubmissionError
from ...formats import StrictJSONError, file_digest, parse_json_strict
# the text rules live with the models, in the core; exported here under their old names, which other modules use
from ...schemas import (
    FIELDS, FINGERPRINT, ISO_DATE, ISO_DATETIME, MAX_PER_QUERY, MAX_PROBLEMS_PER_FILE, MAX_RESAMPLES, MAX_TASKS,
    MODEL_NAME, PACKAGE, REVISION, SYSTEM_NAME, TEXT_RULES, URL, VERSION, run_file_name, text_problem,
)
from .files import (
    MAX_JSON_BYTES, MAX_JSON_DEPTH, MAX_LINE_BYTES, MAX_RUN_BYTES, MAX_RUN_TEXT_BYTES, MAX_SCORES_BYTES, RUN_SUFFIXES,
    Refused, inside, open_run_text, read_json, sha256_file,
)
from .report import MAX_PROBLEMS_SHOWN, Problem, ValidationReport
from .runs import SHOWN_UNKNOWN_IDS
from .score import SCORE_TOLERANCE, SHOWN_DIFFERENCES, compute_scores
from .validate import (
    ADAPTER_FIELDS, FORMAT_VERSION, MODEL_FIELDS, TASK_FIELDS, check_submission, load_scores, scored_submission,
    validate_submission,
)
from .write import score_submission, submission_from_run_dirs, write_submission

__all__ = [
    "ADAPTER_FIELDS", "ConfigError", "FIELDS", "FINGERPRINT", "FORMAT_VERSION", "GapbenchError", "ISO_DATE",
    "ISO_DATETIME", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "MAX_LINE_BYTES", "MAX_PER_QUERY", "MAX_PROBLEMS_PER_FILE",
    "MAX_PROBLEMS_SHOWN", "MAX_RESAMPLES", "MAX_RUN_BYTES", "MAX_RUN_TEXT_BYTES", "MAX_SCORES_BYTES", "MAX_TASKS",
    "MODEL_FIELDS", "MODEL_NAME", "PACKAGE", "Problem", "REVISION", "RUN_SUFFIXES", "Refused", "SCORE_TOLERANCE",
    "SHOWN_DIFFERENCES", "SHOWN_UNKNOWN_IDS", "SYSTEM_NAME", "StrictJSONError", "SubmissionError", "TASK_FIELDS",
    "TEXT_RULES", "URL", "VERSION", "ValidationReport", "check_submission", "compute_scores", "file_digest",
    "inside", "load_scores", "open_run_text", "parse_json_strict", "read_json", "run_file_name", "score_submission",
    "scored_submission", "sha256_file", "submission_from_run_dirs", "text_problem", "validate_submission",
    "write_submission",
]
