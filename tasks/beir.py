"""BEIR (Thakur et al., 2021): the public sets, ``beir/<name>`` as BEIR spells them (``beir/cqadupstack/<forum>``).

Three sources, tried in this order:

* a local copy of the unzipped official layout, ``<DIR>/<name>/corpus.jsonl``, ``queries.jsonl``,
  ``qrels/<split>.tsv`` (``<DIR>/cqadupstack/<forum>/...`` for the forums), given as the task option ``data_dir=DIR`` or
  the environment variable ``GAPBENCH_DATA_BEIR=DIR``;
* ``source=zip`` (default): the official zip from BEIR's server, downloaded once into gapbench's cache, checked against
  the md5 BEIR publishes, and extracted there;
* ``source=hf``: the Hugging Face datasets ``BeIR/<name>`` (configs ``corpus`` and ``queries``) and
``BeIR/<name>-qrels``.

From a local copy or the zip, a corpus of 20 MB or more is converted once into an Arrow file in the cache and
memory-mapped (:mod:`gapbench.corpus_store`; ``GAPBENCH_COMPACT_CORPUS=always|never|auto``), so MS MARCO's 8.8 million
passages never become Python objects; the hub source builds them in memory.

``ignore_identical_ids`` (BEIR's default, true) never ranks a document whose id equals the query id; ArguAna and Quora
put each query itself in the corpus. gapbench applies it as a per-query exclusion masked before the top-k cut, so a
query still gets k results, where BEIR's evaluator drops the self-match after the cut.

>>> get_task("beir/scifact").load()  # doctest: +SKIP
>>> get_task("beir/arguana:data_dir=/data/beir,ignore_identical_ids=false")  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from gapbench.corpus_store import read_beir_folder
from gapbench.errors import ConfigError, DataFormatError, DatasetUnavailableError
from gapbench.files import atomic_writer
from gapbench.formats import file_digest
from gapbench.specs import quote
from gapbench.task import TASKS, Task
from gapbench.tasks._hub import beir_style_folder, load_dataset
from gapbench.tasks.local import read_folder
from gapbench.types import Corpus, Document, Qrels, Queries, Query, TaskData

ZIP_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
HF_ORG = "BeIR"
ENV_VAR = "GAPBENCH_DATA_BEIR"
DOWNLOAD_TIMEOUT_S = 30.0
CITATION = (
    "Thakur, Reimers, Rücklé, Srivastava, Gurevych. BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of "
    "Information Retrieval Models. NeurIPS 2021 Datasets and Benchmarks Track. arXiv:2104.08663"
)
# BEIR's Hugging Face cards carry cc-by-sa-4.0 for its packaging; the original data keeps its own terms.
_CARD = "BEIR card: cc-by-sa-4.0"


@dataclass(frozen=True)
class BeirSet:
    """One row of BEIR's dataset table (README and wiki "Datasets available")."""

    label: str
    md5: str  # md5 of the official zip, as BEIR publishes it
    splits: tuple[str, ...]
    n_queries: int  # queries of the default split
    n_docs: int
    license: str
    description: str
    default_split: str = "test"


# Corpus and query counts are BEIR's (paper Table 1; the README table rounds them).
DATASETS: dict[str, BeirSet] = {
    "msmarco": BeirSet("MS MARCO", "444067daf65d982533ea17ebd59501e4", ("train", "dev", "test"), 6980, 8841823,
                       f"MS MARCO terms (msr-la-nc); {_CARD}", "Passage retrieval for Bing queries (dev split).",
                       default_split="dev"),
    "trec-covid": BeirSet("TREC-COVID", "ce62140cb23feb9becf6270d0d1fe6d1", ("test",), 50, 171332,
                          f"cc-by-sa-4.0; {_CARD}", "Bio-medical retrieval over CORD-19 for COVID-19 topics."),
    "nfcorpus": BeirSet("NFCorpus", "a89dba18a62ef92f7d323ec890a0d38d", ("train", "dev", "test"), 323, 3633,
                        f"cc-by-sa-4.0 (as MTEB lists); {_CARD}", "Nutrition questions to medical literature."),
    "nq": BeirSet("NQ", "d4d3d2e48787a744b6f6e691ff534307", ("train", "test"), 3452, 2681468,
                  f"cc-by-sa-3.0; {_CARD}", "Google search questions to Wikipedia passages."),
    "hotpotqa": BeirSet("HotpotQA", "f412724f78b0d91183a0e86805e16114", ("train", "dev", "test"), 7405, 5233329,
                        f"cc-by-sa-4.0 (as MTEB lists); {_CARD}", "Multi-hop questions to Wikipedia abstracts."),
    "fiqa": BeirSet("FiQA-2018", "17918ed23cd04fb15047f73e6c3bd9d9", ("train", "dev", "test"), 648, 57638,
                    f"cc-by-sa-4.0 (as MTEB lists); {_CARD}", "Financial opinion questions to answers."),
    "arguana": BeirSet("ArguAna", "8ad3e3c2a5867cdced806d6503f29b99", ("test",), 1406, 8674,
                       f"cc-by-sa-4.0 (as MTEB lists); {_CARD}",
                       "Counter-argument retrieval; each query argument is itself in the corpus."),
    "webis-touche2020": BeirSet("Touché-2020", "46f650ba5a527fc69e0a6521c5a23563", ("test",), 49, 382545,
                                f"cc-by-4.0; {_CARD}", "Argument retrieval for controversial questions."),
    "quora": BeirSet("Quora", "18fb154900ba42a600f84b839c173167", ("dev", "test"), 10000, 522931,
                     f"Quora question-pairs terms (see the original release); {_CARD}",
                     "Duplicate-question retrieval; each query question is itself in the corpus."),
    "dbpedia-entity": BeirSet("DBPedia", "c2a39eb420a3164af735795df012ac2c", ("dev", "test"), 400, 4635922,
                              f"cc-by-sa-3.0; {_CARD}", "Entity retrieval over DBpedia abstracts."),
    "scidocs": BeirSet("SCIDOCS", "38121350fc3a4d2f48850f6aff52e4a9", ("test",), 1000, 25657,
                       f"GPL-3.0 (SciDocs repository); {_CARD}", "Citation prediction: paper titles to abstracts."),
    "fever": BeirSet("FEVER", "5a818580227bfb4b35bb6fa46d9b6c03", ("train", "dev", "test"), 6666, 5416568,
                     f"cc-by-nc-sa-3.0 (as MTEB lists); {_CARD}", "Fact verification: claims to Wikipedia abstracts."),
    "climate-fever": BeirSet("Climate-FEVER", "8b66f0a9126c521bae2bde127b4dc99d", ("test",), 1535, 5416593,
                             f"cc-by-sa-4.0 (as MTEB lists); {_CARD}", "Climate claims to Wikipedia abstracts."),
    "scifact": BeirSet("SciFact", "5f7d1de60b170fc8027bb7898e2efca1", ("train", "test"), 300, 5183,
                       f"see the SciFact release (allenai/scifact); {_CARD}", "Scientific claims to abstracts."),
}

CQADUPSTACK_MD5 = "4e41456d7df8ee7760a7f866133bda78"
# (queries, documents) per forum; they sum to BEIR's 13,145 queries and 457,199 documents.
CQADUPSTACK_FORUMS: dict[str, tuple[int, int]] = {
    "android": (699, 22998), "english": (1570, 40221), "gaming": (1595, 45301), "gis": (885, 37637),
    "mathematica": (804, 16705), "physics": (1039, 38316), "programmers": (876, 32176), "stats": (652, 42269),
    "tex": (2906, 68184), "unix": (1072, 47382), "webmasters": (506, 17405), "wordpress": (541, 48605),
}
for _forum, (_nq, _nd) in CQADUPSTACK_FORUMS.items():
    DATASETS[f"cqadupstack/{_forum}"] = BeirSet(
        f"CQADupStack {_forum}", CQADUPSTACK_MD5, ("test",), _nq, _nd,
        f"StackExchange content, cc-by-sa; {_CARD}", f"Duplicate questions of the {_forum} StackExchange forum.",
    )

SOURCES = ("zip", "hf")


def zip_name(name: str) -> str:
    """The archive a set ships in: the 12 CQADupStack forums share ``cqadupstack.zip``."""
    return name.split("/", 1)[0]


def _check_name(name: str) -> BeirSet:
    if name not in DATASETS:
        raise ConfigError(f"unknown BEIR set {name!r}; known: {', '.join(DATASETS)}.")
    return DATASETS[name]


# ---------------------------------------------------------------- local copy

def local_folder(name: str, data_dir: str | os.PathLike) -> Path:
    """``<DIR>/<name>`` in the unzipped official layout, or ``DIR`` itself when it already holds ``corpus.jsonl``."""
    root = Path(data_dir).expanduser()
    return beir_style_folder(
        root, name,
        not_a_folder=f"data_dir for beir/{name} is not a directory; give the folder that holds the unzipped BEIR sets "
                     f"(<DIR>/{name}/corpus.jsonl, queries.jsonl, qrels/<split>.tsv).",
        absent=f"no copy of beir/{name} here: expected {root / name}/corpus.jsonl, queries.jsonl and "
               f"qrels/<split>.tsv (the layout of the unzipped {zip_name(name)}.zip from "
               f"{ZIP_URL.format(name=zip_name(name))}).",
    )


# ---------------------------------------------------------------- official zip

def cache_root() -> Path:
    from gapbench.cache import cache_dir

    return cache_dir("datasets") / "beir"


def _offline_message(name: str, url: str, why: str) -> str:
    return (
        f"cannot download BEIR {name} from {url} ({why}). Download that zip elsewhere, unzip it into a folder DIR "
        f"(giving DIR/{zip_name(name)}/corpus.jsonl ...), and pass the task option data_dir=DIR or set {ENV_VAR}=DIR; "
        f"or try source=hf."
    )


def download_zip(name: str) -> Path:
    """The extracted official folder of ``name``, downloading and checking the zip on first use."""
    archive = zip_name(name)
    root = cache_root()
    folder = root / name
    done = root / f".{archive}.complete"
    if done.exists() and folder.is_dir():
        return folder
    url = ZIP_URL.format(name=archive)
    expected = DATASETS[name].md5
    root.mkdir(parents=True, exist_ok=True)
    zip_path = root / f"{archive}.zip"
    if not (zip_path.exists() and file_digest(zip_path, "md5") == expected):
        try:
            # the writer drops the partial download on any exception, a wrong checksum or an interrupt included
            with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as resp, \
                    atomic_writer(zip_path, binary=True) as out:
                h = hashlib.md5()
                for block in iter(lambda: resp.read(1 << 20), b""):
                    h.update(block)
                    out.write(block)
                if h.hexdigest() != expected:
                    raise DatasetUnavailableError(
                        f"the BEIR zip downloaded from {url} has md5 {h.hexdigest()}, but BEIR publishes {expected}; "
                        f"the download is truncated or the file changed upstream. Retry, or give a checked local copy "
                        f"with data_dir=DIR or {ENV_VAR}=DIR."
                    )
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DatasetUnavailableError(_offline_message(name, url, f"{type(exc).__name__}: {reason}")) from None
    _extract(zip_path, root, archive)
    done.touch()
    if not (folder / "corpus.jsonl").exists():
        raise DataFormatError(f"the zip does not hold {name}/corpus.jsonl; delete it to download again.", path=zip_path)
    return folder


def zip_on_disk(name: str) -> str:
    """The ``data_on_disk`` of a zip-sourced set: "" when gapbench's cache holds the zip extracted after its md5 was
    checked (what :func:`download_zip` marks), so loading downloads nothing; else where it is missing and the fix."""
    archive = zip_name(name)
    root = cache_root()
    if (root / f".{archive}.complete").exists() and (root / name / "corpus.jsonl").is_file():
        return ""
    return (f"gapbench's cache has no checked copy of {archive}.zip extracted at {root / name}, so loading beir/{name} "
            f"would download it; run `gapbench run beir/{name}` once with network access, or copy {root / name} and "
            f"its marker {root / f'.{archive}.complete'} there from a machine that has them")


def _extract(zip_path: Path, root: Path, archive: str) -> None:
    with zipfile.ZipFile(zip_path) as zf:
        for member in zf.namelist():
            # a member outside <archive>/ (absolute, or climbing with ..) must never be written
            parts = Path(member).parts
            if not parts or parts[0] != archive or ".." in parts or Path(member).is_absolute():
                raise DataFormatError(f"unexpected member {member!r} in the BEIR zip.", path=zip_path)
        zf.extractall(root)


# ---------------------------------------------------------------- Hugging Face

def _hf_load(dataset: str, config: str | None, split: str, revision: str):
    fix = f"Without hub access, unzip the official BEIR zip into DIR and pass data_dir=DIR or set {ENV_VAR}=DIR."
    return load_dataset(dataset, config, split, revision, feature="source=hf", fix=fix)


def load_hf(name: str, split: str, revision: str = "main") -> TaskData:
    if name.startswith("cqadupstack/"):
        raise ConfigError(
            "BEIR publishes the CQADupStack forums on the hub only as qrels, not as per-forum corpora; use "
            "source=zip (default) or a local copy (data_dir=DIR)."
        )
    repo = f"{HF_ORG}/{name}"
    source = f"hf:{repo}@{revision}"
    docs = (
        Document(str(r["_id"]), str(r.get("text") or ""), str(r.get("title") or ""))
        for r in _hf_load(repo, "corpus", "corpus", revision)
    )
    corpus = Corpus(docs, source=source)
    queries = Queries(
        (Query(str(r["_id"]), str(r.get("text") or "")) for r in _hf_load(repo, "queries", "queries", revision)),
        source=source,
    )
    judged: dict[str, dict[str, int]] = {}
    for r in _hf_load(f"{repo}-qrels", None, split, revision):
        judged.setdefault(str(r["query-id"]), {})[str(r["corpus-id"])] = int(r["score"])
    qrels = Qrels(judged, source=f"hf:{repo}-qrels@{revision}")
    queries = Queries(q for q in queries.values() if q.query_id in qrels)
    return TaskData(corpus, queries, qrels)


# ---------------------------------------------------------------- loading

def identical_id_exclusions(data: TaskData) -> dict[str, frozenset[str]]:
    """Each query excludes the document that carries its own id (BEIR's ``ignore_identical_ids``)."""
    absent = set(data.corpus.missing(data.queries))  # one pass, not a lookup per query, on a memory-mapped corpus
    return {q: frozenset((q,)) for q in data.queries if q not in absent}


def load(name: str, split: str | None = None, source: str = "zip", data_dir: str | None = None,
         ignore_identical_ids: bool = True, revision: str = "main") -> TaskData:
    spec = _check_name(name)
    split = split or spec.default_split
    data_dir = data_dir or os.environ.get(ENV_VAR)
    if data_dir:
        # a local copy is read as `gapbench run DIR` reads a folder: its qrels may not be a link out of it
        data = read_folder(local_folder(name, data_dir), split)
    elif source == "hf":
        data = load_hf(name, split, revision)
    else:
        data = read_beir_folder(download_zip(name), split)
    if ignore_identical_ids:
        data = dataclasses.replace(data, excluded=identical_id_exclusions(data))  # unjudged, the count, kept
    return data


def make_task(name: str, split: str | None = None, source: str = "zip", data_dir: str | None = None,
              ignore_identical_ids: bool = True, revision: str = "main") -> Task:
    spec = _check_name(name)
    split = split or spec.default_split
    if split not in spec.splits:
        raise ConfigError(f"beir/{name} has no split {split!r}; BEIR ships {', '.join(spec.splits)}.")
    if source not in SOURCES:
        raise ConfigError(f"beir source {source!r}: choose source=zip (official download) or source=hf.")
    local = data_dir or os.environ.get(ENV_VAR)
    remake = ""
    if local:
        src, rev = f"local BEIR copy {Path(local).expanduser()}", "local"
        # the copy's absolute folder and every option that changes the data: re-scoring makes the task again from it
        remake = f"beir/{name}:data_dir={quote(Path(local).expanduser().resolve())},split={split}" + (
            "" if ignore_identical_ids else ",ignore_identical_ids=false")
    elif source == "hf":
        src, rev = f"hf:{HF_ORG}/{name}", revision
    else:
        src, rev = ZIP_URL.format(name=zip_name(name)), f"md5:{spec.md5}"
    on_disk = functools.partial(zip_on_disk, name) if not local and source == "zip" else None
    return Task(
        name=f"beir/{name}",
        loader=functools.partial(load, name, split, source, data_dir, ignore_identical_ids, revision),
        source=src,
        revision=rev,
        split=split,
        license=spec.license,
        citation=CITATION,
        description=f"BEIR {spec.label}: {spec.description}",
        main_measure="nDCG@10",
        measures=("nDCG@10", "R@100", "RR@10"),
        n_docs=spec.n_docs,
        n_queries=spec.n_queries if split == spec.default_split else None,
        spec=remake,
        data_on_disk=on_disk,
    )


def _factory(name: str):
    def task(split: str | None = None, source: str = "zip", data_dir: str | None = None,
             ignore_identical_ids: bool = True, revision: str = "main") -> Task:
        return make_task(name, split, source, data_dir, ignore_identical_ids, revision)

    task.__name__ = f"beir_{name.replace('/', '_').replace('-', '_')}"
    return task


for _name in DATASETS:
    TASKS.register(f"beir/{_name}", _factory(_name))
