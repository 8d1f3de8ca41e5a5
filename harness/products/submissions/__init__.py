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

>>> from gapbench.products.submissions.validate import validate_submission
>>> report = validate_submission("leaderboards/impliret/submissions/bm25")  # doctest: +SKIP
>>> report.ok, str(report)  # doctest: +SKIP
"""
