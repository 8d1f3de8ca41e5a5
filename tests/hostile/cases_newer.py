"""The newer commands' hostile inputs (issue 31): task options that would name files outside the task's folder, run
directories whose manifest names another task than the data they were made on, ``obliq build``'s labels and lens,
``regress`` across different depths, completion flags with a shell that does not exist, trec_eval's list form of
measures and an ``irds:`` id whose files are not on this machine.

The run directories are real: bm25 on a five-document BEIR folder (searched to k=2 and k=5), and the ImpliRet
multispeaker/wknow pair the CI gate's cases build (:mod:`hostile.cases_gate`).
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path

from . import Case
from .cases_gate import _pair

DOCS = [("d1", "the cat sat on the mat"), ("d2", "dogs chase cats"), ("d3", "a bird sang"),
        ("d4", "cats and dogs are pets"), ("d5", "the mat was red")]
QUERIES = [("q1", "cat on a mat"), ("q2", "dogs"), ("q3", "singing birds")]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td5\t1\nq2\td2\t1\nq2\td4\t1\nq3\td3\t1\n"
OTHER = "query-id\tcorpus-id\tscore\nq1\td2\t1\n"  # another file's judgements: never to be read as the task's


def _folder(base: str = "f") -> dict[str, str]:
    return {f"{base}/corpus.jsonl": "".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS),
            f"{base}/queries.jsonl": "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES),
            f"{base}/qrels/test.tsv": QRELS, "other.tsv": OTHER, f"{base}/qrels/other.tsv": OTHER}


FOLDER = _folder()
_BUILT: dict[str, Path] = {}


def _runs() -> Path:
    """bm25 on the folder searched to k=2 and to k=5 (one run directory each), built once per session."""
    if "root" in _BUILT:
        return _BUILT["root"]
    import gapbench

    root = Path(tempfile.mkdtemp(prefix="gapbench-newer-"))
    atexit.register(shutil.rmtree, root, True)
    for rel, text in FOLDER.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    for k in (2, 5):
        gapbench.run(str(root / "f"), "bm25", measures=["nDCG@10", "RR@10", "R@100"], k=k, output=root / f"k{k}" / "f")
    _BUILT["root"] = root
    return root


def _depths(tmp: Path) -> None:
    for k in (2, 5):
        shutil.copytree(_runs() / f"k{k}", tmp / f"k{k}")
    shutil.copytree(_runs() / "f", tmp / "f")


def _spec_escapes(tmp: Path) -> None:
    """A run directory of the folder whose manifest's task string names a split outside the folder."""
    _depths(tmp)
    path = tmp / "k5" / "f" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["task"]["spec"] = f"{tmp / 'f'}:split=../../other"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    shutil.copytree(tmp / "k5", tmp / "k5b")


def _link_out(tmp: Path) -> None:
    (tmp / "f" / "qrels" / "evil.tsv").symlink_to(tmp / "other.tsv")


def _relabelled(tmp: Path) -> None:
    """The gate's wknow run directory, its manifest relabelled as the temporal set (ImpliRet's sets share ids)."""
    _pair(tmp)
    path = tmp / "cand" / "wknow" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["task"]["name"] = "impliret/multispeaker/temporal"
    path.write_text(json.dumps(manifest), encoding="utf-8")


def _forged_corpus(tmp: Path) -> None:
    """The candidate's manifest records another corpus fingerprint than the task's."""
    _pair(tmp)
    path = tmp / "cand" / "wknow" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["fingerprints"]["corpus"] = "ab" * 32
    path.write_text(json.dumps(manifest), encoding="utf-8")


TREC_RUN = "".join(f"q1 Q0 d{i} {i} {10 - i}.0 sys\n" for i in range(1, 11))
TREC_QRELS = "q1 0 d1 1\nq1 0 d7 1\n"
LABELS_UNKNOWN = "x1\tlate\nx2\tlate\n"
ABOUT = ["--system", "relabelled", "--description", "a run of another set.", "--contact", "Me <me@example.org>"]
OFFLINE = {"IR_DATASETS_HOME": "{tmp}/irds", "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "HOME": "{tmp}/home",
           "NO_PROXY": "", "no_proxy": ""}

CASES = [
    # 1. a split is a plain name: no relative, absolute, '..' or symlinked form makes another file the judgements
    Case("split-relative", ["run", "{tmp}/f:split=../other", "-r", "bm25"], files=FOLDER,
         names=["split='../other'", "not a plain name"]),
    Case("split-absolute", ["run", "{tmp}/f:split={tmp}/other", "-r", "bm25"], files=FOLDER,
         names=["split=", "not a plain name"]),
    Case("split-dotdot", ["run", "{tmp}/f:split=..", "-r", "bm25"], files=FOLDER, names=["split='..'"]),
    Case("split-subfolder", ["run", "{tmp}/f:split=qrels/other", "-r", "bm25"], files=FOLDER,
         names=["split='qrels/other'"]),
    Case("split-symlinked", ["run", "{tmp}/f:split=evil", "-r", "bm25"], files=FOLDER, setup=_link_out,
         names=["evil.tsv", "leads outside its folder"]),
    Case("split-data-flag", ["regress", "--baseline", "{tmp}/k5", "--candidate", "{tmp}/k5", "--data",
                             "{tmp}/f:split=../other"], setup=_depths, names=["split='../other'"]),
    Case("split-from-manifest", ["regress", "--baseline", "{tmp}/k5", "--candidate", "{tmp}/k5b", "--rescore",
                                 "always"], setup=_spec_escapes, names=["split='../../other'", "not a plain name"]),
    # 2. a run directory's manifest against the task it names
    Case("submit-create-relabelled", ["submit", "create", "{tmp}/cand/wknow", "--out", "{tmp}/sub", *ABOUT],
         setup=_relabelled,
         names=["impliret/multispeaker/temporal", "records the corpus fingerprint 9944b32d", "manifest.json"]),
    Case("regress-forged-corpus", ["regress", "--baseline", "{tmp}/base", "--candidate", "{tmp}/cand"],
         setup=_forged_corpus,
         names=["corpus fingerprint abababababababab", "has 9944b32d4243890e", "manifest.json"]),
    Case("compare-forged-corpus", ["compare", "{tmp}/base/wknow", "{tmp}/cand/wknow"],
         setup=_forged_corpus, names=["corpus fingerprint abababababababab"]),
    Case("report-forged-corpus", ["report", "impliret/multispeaker/wknow", "{tmp}/base/wknow", "{tmp}/cand/wknow",
                                  "--out", "{tmp}/report"], setup=_forged_corpus,
         names=["corpus fingerprint abababababababab", "cand/wknow/manifest.json"]),
    # 3. obliq build's inputs
    Case("obliq-labels-binary", ["obliq", "build", "{tmp}/f/corpus.jsonl", "--lens", "the topic", "--out",
                                 "{tmp}/t", "--labels", "{tmp}/labels.tsv", "--labels-as", "documents"],
         files={**FOLDER, "labels.tsv": b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe binary"},
         names=["labels.tsv", "not valid UTF-8"]),
    Case("obliq-labels-unknown", ["obliq", "build", "{tmp}/f/corpus.jsonl", "--lens", "the topic", "--out",
                                  "{tmp}/t", "--labels", "{tmp}/labels.tsv", "--labels-as", "documents"],
         files={**FOLDER, "labels.tsv": LABELS_UNKNOWN},
         names=["none of the 2 labelled documents is in the corpus", "'x1'", "labels.tsv"]),
    Case("obliq-labels-unknown-dry-run", ["obliq", "build", "{tmp}/f/corpus.jsonl", "--lens", "the topic", "--out",
                                          "{tmp}/t", "--labels", "{tmp}/labels.tsv", "--dry-run"],
         files={**FOLDER, "labels.tsv": LABELS_UNKNOWN}, names=["none of the 2 labelled documents"]),
    Case("obliq-lens-100kb", ["obliq", "build", "{tmp}/f/corpus.jsonl", "--lens", "word " * 20_000, "--out",
                              "{tmp}/t", "--dry-run"], files=FOLDER, names=["lens", "over 2,000"]),
    Case("obliq-lens-file-100kb", ["obliq", "build", "{tmp}/f/corpus.jsonl", "--lens", "{tmp}/lens.txt", "--out",
                                   "{tmp}/t", "--dry-run"], files={**FOLDER, "lens.txt": "word " * 20_000},
         names=["lens.txt", "100,000 bytes"]),
    # 4. regress across depths: a measure that reads past the smaller k
    Case("regress-k-differs", ["regress", "--baseline", "{tmp}/k5", "--candidate", "{tmp}/k2", "--rescore", "never"],
         setup=_depths, names=["k=5", "k=2", "nDCG@10 reads to rank 10", "--k 5"]),
    Case("regress-k-differs-whole-ranking", ["regress", "--baseline", "{tmp}/k2", "--candidate", "{tmp}/k5",
                                             "--measure", "R@100", "--rescore", "never"],
         setup=_depths, names=["k=2", "k=5", "re-run the baseline with --k 5"]),
    # 5. completion flags with a shell that does not exist write nothing
    Case("completion-junk-shell", ["--install-completion", "junkshell"], process=True,
         env={"HOME": "{tmp}/home", "SHELL": "/bin/bash"}, names=["'junkshell'", "bash, zsh"]),
    Case("completion-junk-shell-eq", ["--show-completion=junk"], names=["'junk'"]),
    # 6. trec_eval's list form and measure names in any case that stays unambiguous
    Case("trec-list-form", ["evaluate", "--run", "{tmp}/run.txt", "--qrels", "{tmp}/qrels.txt", "-m", "P.5,10"],
         files={"run.txt": TREC_RUN, "qrels.txt": TREC_QRELS}, expect=0),
    Case("measure-lower-case", ["evaluate", "--run", "{tmp}/run.txt", "--qrels", "{tmp}/qrels.txt", "-m",
                                "ndcg@10,rr@10,p@5"], files={"run.txt": TREC_RUN, "qrels.txt": TREC_QRELS}, expect=0),
    Case("trec-list-bare-number", ["evaluate", "--run", "{tmp}/run.txt", "--qrels", "{tmp}/qrels.txt", "-m",
                                   "nDCG@10,20"], files={"run.txt": TREC_RUN, "qrels.txt": TREC_QRELS},
         names=["'20'"]),
    # an irds: id whose files are not here (ir_datasets' download goes nowhere): its log folded into the one line
    Case("irds-offline", ["run", "irds:cranfield", "-r", "bm25"], process=True, env=OFFLINE,
         names=["irds:cranfield", "IR_DATASETS_HOME", "ir_datasets logged"]),
]


def completion_home_untouched(tmp: Path) -> bool:
    """Whether the completion case's HOME is as it was made: no rc file, no completion script written."""
    home = tmp / "home"
    return not home.exists() or not any(home.rglob("*"))

