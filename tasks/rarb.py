"""RAR-b (Xiao, Hudson, Al Moubayed, 2024): reasoning as retrieval, in its two settings.

Full-dataset retrieval, ``rarb/<task>``: the Hugging Face dataset ``RAR-b/<task>`` at the revision MTEB pins. Each
repository is a BEIR folder plus the task's instruction::

    corpus.jsonl  queries.jsonl  qrels/test.tsv  instruction.txt  (and a datasets loading script, not used here)

Offline, give a copy of that folder as ``<DIR>/<task>/`` with the task option ``data_dir=DIR`` or the environment
variable ``GAPBENCH_DATA_RARB=DIR`` (``huggingface-cli download RAR-b/<task> --repo-type dataset --revision REV
--local-dir DIR/<task>`` makes one).

Multiple-choice retrieval, ``rarb-mcr/<task>``: the authors' ``mcr/*.csv`` files (shipped with gapbench, see
``data/rarb_mcr/PROVENANCE.md``); each row is a question, its candidate answers and the index of the correct one. A row
becomes one query whose ranking may only hold that row's own candidates: the corpus is the union of all candidates
(doc ids ``<row>-<j>``) and every other row's candidates are in the query's ``excluded`` set. The main measure ``P@1``
is then the MCR accuracy (top-1 candidate is correct); ``RR`` is the reciprocal rank of the correct candidate.
``gapbench.analyses.mcr.mcr_accuracy`` computes the same numbers without the per-query masks, which is what whole files
need.

Both settings take ``instruction=true`` (default false): the task's instruction (``instruction.txt``, or the CSV's
``instructions`` column) becomes the queries' ``instruction``, which retrievers put before the query text, as the
authors' "with instruction" runs do.
"""

from __future__ import annotations

import ast
import csv
import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from gapbench.corpus_store import read_beir_folder
from gapbench.errors import (
    ConfigError,
    DataFormatError,
    DatasetUnavailableError,
)
from gapbench.formats import open_text
from gapbench.task import TASKS, Task
from gapbench.tasks._hub import beir_style_folder, first_line
from gapbench.types import Corpus, Document, OtherRowsExcluded, Qrels, Queries, Query, TaskData

if TYPE_CHECKING:
    from importlib.abc import Traversable

HF_ORG = "RAR-b"
ENV_VAR = "GAPBENCH_DATA_RARB"
GITHUB_REPO = "gowitheflow-1998/RAR-b"
GITHUB_COMMIT = "060677fd91cf7333bc0b2976ce6a76b52a2346a6"
CITATION = (
    "Xiao, Hudson, Al Moubayed. RAR-b: Reasoning as Retrieval Benchmark. 2024. arXiv:2404.06347"
)
FULL_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "instruction.txt")

# Hugging Face revisions as MTEB pins them (mteb/tasks/Retrieval/eng/*Retrieval.py, dataset["revision"]).
REVISIONS = {
    "alphanli": "303f40ef3d50918d3dc43577d33f2f7344ad72c1",
    "hellaswag": "a5c990205e017d10761197ccab3000936689c3ae",
    "piqa": "bb30be7e9184e6b6b1d99bbfe1bb90a3a81842e6",
    "siqa": "4ed8415e9dc24060deefc84be59e2db0aacbadcc",
    "quail": "1851bc536f8bdab29e03e29191c4586b1d8d7c5a",
    "ARC-Challenge": "c481e0da3dcbbad8bce7721dea9085b74320a0a3",
    "winogrande": "f74c094f321077cf909ddfb8bccc1b5912a4ac28",
    "spartqa": "9ab3ca3ccdd0d43f9cd6d346a363935d127f4f45",
    "math-pooled": "2393603c0221ff52f448d12dd75f0856103c6cca",
    "humanevalpack-mbpp-pooled": "25f7d11a7ac12dcbb8d3836eb2de682b98c825e4",
    "TempReason-l1": "9097e99aa8c9d827189c65f2e11bfe756af439f6",
    "TempReason-l2-pure": "27668949b97bfb178901e0cf047cbee805305dc1",
    "TempReason-l2-fact": "13758bcf978613b249d0de4d0840f57815122bdf",
    "TempReason-l2-context": "f2dc4764024ae93cc42d9c09bc53a31da1af84b2",
    "TempReason-l3-pure": "68fba138e7e63daccecfbdad0a9d2714e56e34ff",
    "TempReason-l3-fact": "4b70e90197901da24f3cfcd51d27111292878680",
    "TempReason-l3-context": "3c42539652de3d787cecfb897d3b20905e5c7250",
}
# RAR-b declares no licence of its own; these are the source datasets' licences as MTEB's task metadata lists them.
LICENSES = {
    "alphanli": "CC-BY-NC-4.0 (αNLI)",
    "hellaswag": "MIT (HellaSwag)",
    "piqa": "AFL-3.0 (PIQA)",
    "siqa": "not specified (Social IQa)",
    "quail": "CC-BY-NC-SA-4.0 (QuAIL)",
    "ARC-Challenge": "CC-BY-SA-4.0 (ARC)",
    "winogrande": "not specified (WinoGrande)",
    "spartqa": "MIT (SpartQA)",
    "math-pooled": "MIT (MATH, GSM8K, MetaMathQA)",
    "humanevalpack-mbpp-pooled": "CC-BY-NC-SA-4.0 (HumanEvalPack, MBPP, CodeSearchNet)",
    **{t: "CC-BY-SA-3.0 (TempReason)" for t in REVISIONS if t.startswith("TempReason")},
}
# (documents, queries) of the test split, as MTEB's descriptive statistics report them; None where MTEB gives none.
FULL_COUNTS = {
    "alphanli": (241347, 1532), "hellaswag": (199162, 10042), "quail": (32787, 2720), "ARC-Challenge": (9350, 1172),
    "winogrande": (5095, 1267), "spartqa": (1592, 3594), "math-pooled": (389376, 6319),
    "humanevalpack-mbpp-pooled": (301482, 1484), "TempReason-l2-fact": (15787, 5397),
    "TempReason-l2-context": (15787, 5397), "TempReason-l3-pure": (15664, 4426),
}
FULL_TASKS = tuple(REVISIONS)

# rarb-mcr task -> (vendored file, path in the RAR-b GitHub repository, rows, candidates over all rows)
MCR_FILES = {
    "ARC-Challenge": ("ARC-Challenge-test.csv.gz", "mcr/ARC-Challenge-test.csv", 1172, 4687),
    "alphanli": ("alphanli-test.csv.gz", "mcr/alphanli-test.csv", 1532, 3064),
    "piqa": ("physicaliqa-test.csv.gz", "mcr/physicaliqa-test.csv", 1838, 3676),
    "siqa": ("socialiqa-test.csv.gz", "mcr/socialiqa-test.csv", 1954, 5862),
    "winogrande": ("winogrande-test.csv.gz", "mcr/winogrande-test.csv", 1267, 2534),
    "spartqa": ("spartqa-test.csv.gz", "mcr/spartqa-test.csv", 3579, 14316),
    "TempReason-l2-pure": ("TempReason_test-l2-pure.csv.gz", "mcr/TempReason/test-l2-pure.csv", 5521, 51786),
    "TempReason-l3-pure": ("TempReason_test-l3-pure.csv.gz", "mcr/TempReason/test-l3-pure.csv", 4437, 39816),
}
MCR_COLUMNS = ("instructions", "queries", "documents", "labels")


# ---------------------------------------------------------------- full-dataset retrieval

def _local_folder(task: str, data_dir: str | None) -> Path | None:
    root = data_dir or os.environ.get(ENV_VAR)
    if not root:
        return None
    where = "data_dir" if data_dir else ENV_VAR
    return beir_style_folder(
        Path(root).expanduser(), task,
        not_a_folder=f"{where} for RAR-b is not a directory; give the folder that holds <task>/ folders.",
        absent=f"no copy of {HF_ORG}/{task} here: expected {task}/corpus.jsonl, {task}/queries.jsonl, "
               f"{task}/qrels/test.tsv and {task}/instruction.txt, laid out as the Hugging Face repository.",
    )


def _hub_folder(task: str, revision: str, files: tuple[str, ...]) -> Path:
    repo = f"{HF_ORG}/{task}"
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ConfigError(
            f"reading {repo} from the hub needs 'huggingface_hub': pip install 'gapbench[hub]'.") from None
    try:
        return Path(snapshot_download(repo, repo_type="dataset", revision=revision, allow_patterns=list(files)))
    except Exception as exc:  # the hub client raises many types (connection, offline mode, missing revision)
        raise DatasetUnavailableError(
            f"cannot download the Hugging Face dataset {repo} (revision {revision[:12]}): {type(exc).__name__}: "
            f"{first_line(exc, 300).rstrip('.')}. With hub access it downloads by itself; without, "
            f"download it elsewhere (huggingface-cli download {repo} --repo-type dataset --revision {revision} "
            f"--local-dir DIR/{task}) and pass the task option data_dir=DIR or set {ENV_VAR}=DIR."
        ) from None


def task_folder(task: str, revision: str | None = None, data_dir: str | None = None,
                files: tuple[str, ...] = FULL_FILES) -> Path:
    """The folder holding ``RAR-b/<task>``'s files: the local copy if one is given, else the hub snapshot."""
    local = _local_folder(task, data_dir)
    if local is not None:
        return local
    return _hub_folder(task, revision or REVISIONS[task], files)


def read_instruction(folder: Path) -> str:
    path = folder / "instruction.txt"
    if not path.exists():
        raise DataFormatError("missing instruction.txt, which instruction=true needs; every RAR-b repository has one.",
                              path=folder)
    with open_text(path) as fh:
        text = fh.read().strip()
    if not text:
        raise DataFormatError("instruction.txt is empty.", path=path)
    return text


def load_full(task: str, revision: str | None = None, data_dir: str | None = None, instruction: str = "") -> TaskData:
    folder = task_folder(task, revision, data_dir)
    data = read_beir_folder(folder, split="test")
    if instruction:
        data = TaskData(data.corpus, data.queries.with_instruction(instruction), data.qrels, data.excluded)
    return data


def _spec_name(base: str, **options) -> str:
    """A task name that names its non-default options, so results with and without instructions never mix."""
    parts = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in options.items() if v]
    return base + (":" + ",".join(parts) if parts else "")


def make_full_task(task: str, instruction: bool = False, data_dir: str | None = None,
                   revision: str | None = None) -> Task:
    if task not in REVISIONS:
        raise ConfigError(f"unknown RAR-b task {task!r}; the tasks are {', '.join(FULL_TASKS)}.")
    revision = revision or REVISIONS[task]
    text = read_instruction(task_folder(task, revision, data_dir, ("instruction.txt",))) if instruction else ""
    n_docs, n_queries = FULL_COUNTS.get(task, (None, None))
    return Task(
        name=_spec_name(f"rarb/{task}", instruction=instruction),
        loader=functools.partial(load_full, task, revision, data_dir, text),
        source=f"hf:{HF_ORG}/{task}",
        revision=revision,
        split="test",
        license=LICENSES[task],
        citation=CITATION,
        description=f"RAR-b {task}, full-dataset retrieval: find the answer to a reasoning question in a pooled corpus"
                    + (" (with the task instruction)." if instruction else "."),
        main_measure="nDCG@10",
        measures=("nDCG@10", "R@10", "R@100", "RR@10"),
        n_docs=n_docs if revision == REVISIONS[task] else None,
        n_queries=n_queries if revision == REVISIONS[task] else None,
        instruction=text,
    )


def _full_factory(task: str):
    def factory(instruction: bool = False, data_dir: str | None = None, revision: str | None = None) -> Task:
        return make_full_task(task, instruction, data_dir, revision)

    factory.__name__ = f"rarb_{task.replace('-', '_')}"
    factory.__doc__ = f"RAR-b {task} (hf:{HF_ORG}/{task}); options instruction=true|false, data_dir=DIR, revision=SHA."
    return factory


# ---------------------------------------------------------------- multiple-choice retrieval (MCR)

@dataclass(frozen=True)
class MCRRow:
    """One row of an ``mcr/*.csv`` file; ``row`` counts data rows from 0, ``line`` is the file line it starts on."""

    row: int
    line: int
    instruction: str
    query: str
    candidates: tuple[str, ...]
    label: int


def mcr_file(task: str) -> Traversable:
    if task not in MCR_FILES:
        raise ConfigError(f"unknown RAR-b MCR task {task!r}; the tasks are {', '.join(MCR_FILES)}.")
    return resources.files("gapbench.tasks") / "data" / "rarb_mcr" / MCR_FILES[task][0]


def iter_mcr_csv(path: Path | str) -> Iterator[MCRRow]:
    """Rows of an MCR csv (plain or gzipped), validated. Candidate lists are Python literals: parsed, never
    evaluated."""
    with open_text(path) as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise DataFormatError("the file is empty; expected the header instructions,queries,documents,labels.",
                                  path=path)
        missing = [c for c in MCR_COLUMNS if c not in header]
        if missing:
            raise DataFormatError(f"header lacks column(s) {', '.join(missing)} (found: {', '.join(header)}); "
                                  "an MCR file has instructions,queries,documents,labels.", path=path, line=1)
        col = {c: header.index(c) for c in MCR_COLUMNS}
        row_no = 0
        line = reader.line_num + 1
        for fields in reader:
            if not any(f.strip() for f in fields):
                line = reader.line_num + 1
                continue
            if len(fields) != len(header):
                raise DataFormatError(f"expected {len(header)} fields, found {len(fields)}.", path=path, line=line)
            yield _parse_row(fields, col, row_no, line, path)
            row_no += 1
            line = reader.line_num + 1


def _parse_row(fields: list[str], col: Mapping[str, int], row_no: int, line: int, path) -> MCRRow:
    raw = fields[col["documents"]]
    try:
        candidates = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise DataFormatError(f"documents {raw[:60]!r} is not a Python list literal of strings.",
                              path=path, line=line) from None
    if not isinstance(candidates, (list, tuple)) or not candidates or not all(isinstance(c, str) for c in candidates):
        raise DataFormatError(f"documents must be a non-empty list of strings, found {raw[:60]!r}.", path=path,
                              line=line)
    label_text = fields[col["labels"]].strip()
    try:
        label = int(label_text)
    except ValueError:
        raise DataFormatError(f"label {label_text!r} is not an integer index.", path=path, line=line) from None
    if not 0 <= label < len(candidates):
        raise DataFormatError(f"label {label} is outside the {len(candidates)} candidates (0..{len(candidates) - 1}).",
                              path=path, line=line)
    query = fields[col["queries"]]
    if not query.strip():
        raise DataFormatError("the query is empty.", path=path, line=line)
    return MCRRow(row_no, line, fields[col["instructions"]].strip(), query, tuple(candidates), label)


def read_mcr(task: str, limit: int | None = None) -> list[MCRRow]:
    """The first ``limit`` rows (all when None) of the vendored MCR file of ``task``."""
    with resources.as_file(mcr_file(task)) as path:
        rows: list[MCRRow] = []
        for row in iter_mcr_csv(path):
            if limit is not None and len(rows) >= limit:
                break
            rows.append(row)
    if not rows:
        raise DataFormatError("no rows.", path=str(mcr_file(task)))
    return rows


def mcr_instruction(task: str) -> str:
    with resources.as_file(mcr_file(task)) as path:
        first = next(iter_mcr_csv(path), None)
    return first.instruction if first else ""


def mcr_task_data(rows: list[MCRRow], instruction: bool = False, source: str | None = None) -> TaskData:
    docs: list[Document] = []
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    own: dict[str, tuple[str, ...]] = {}
    for r in rows:
        qid = str(r.row)
        ids = tuple(f"{r.row}-{j}" for j in range(len(r.candidates)))
        docs.extend(Document(did, text) for did, text in zip(ids, r.candidates))
        queries.append(Query(qid, r.query, r.instruction if instruction else ""))
        # A candidate with the same text as the correct one is the correct answer too (7 TempReason/Social IQa rows
        # repeat it); judging only one copy would make the tie rule, not the retriever, decide those rows.
        gold = r.candidates[r.label]
        qrels[qid] = {did: 1 for did, text in zip(ids, r.candidates) if text == gold}
        own[qid] = ids
    corpus = Corpus(docs, source=source)
    return TaskData(corpus, Queries(queries, source=source), Qrels(qrels, source=source),
                    OtherRowsExcluded(own, frozenset(corpus.ids())))


def load_mcr(task: str, limit: int | None = None, instruction: bool = False) -> TaskData:
    return mcr_task_data(read_mcr(task, limit), instruction, source=str(mcr_file(task)))


def make_mcr_task(task: str, instruction: bool = False, limit: int | None = None) -> Task:
    if task not in MCR_FILES:
        raise ConfigError(f"unknown RAR-b MCR task {task!r}; the tasks are {', '.join(MCR_FILES)}.")
    if limit is not None and limit < 1:
        raise ConfigError(f"rarb-mcr/{task}: limit={limit}; give a positive number of rows, or leave it out for all.")
    _, repo_path, n_rows, n_cands = MCR_FILES[task]
    full = limit is None or limit >= n_rows
    return Task(
        name=_spec_name(f"rarb-mcr/{task}", instruction=instruction, limit=None if full else limit),
        loader=functools.partial(load_mcr, task, None if full else limit, instruction),
        source=f"gapbench package data (github:{GITHUB_REPO} {repo_path})",
        revision=f"github:{GITHUB_REPO}@{GITHUB_COMMIT}",
        split="test",
        license=LICENSES[task],
        citation=CITATION,
        description=f"RAR-b {task}, multiple-choice retrieval: rank each question's own candidates; P@1 is the "
                    "accuracy" + (" (with the task instruction)." if instruction else "."),
        main_measure="P@1",
        measures=("P@1", "RR"),
        n_docs=n_cands if full else None,
        n_queries=n_rows if full else limit,
        instruction=mcr_instruction(task) if instruction else "",
    )


def _mcr_factory(task: str):
    def factory(instruction: bool = False, limit: int | None = None) -> Task:
        return make_mcr_task(task, instruction, limit)

    factory.__name__ = f"rarb_mcr_{task.replace('-', '_')}"
    factory.__doc__ = f"RAR-b {task}, multiple-choice setting; options instruction=true|false, limit=N (first N rows)."
    return factory


for _task in FULL_TASKS:
    TASKS.register(f"rarb/{_task}", _full_factory(_task))
for _task in MCR_FILES:
    TASKS.register(f"rarb-mcr/{_task}", _mcr_factory(_task))
