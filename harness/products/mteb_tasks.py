"""Where MTEB has a gapbench task under its own name: the table the MTEB export names its task files by.

Each row maps a gapbench task name (as registered, without options) to MTEB's task name, the split its scores go
under and the subset (``hf_subset``). The names and splits are MTEB 2.26's own task metadata
(``mteb.get_task(name).metadata``: ``name``, ``eval_splits``, ``hf_subsets``), read from the installed package and
pinned here; ``tests/test_mteb_export.py`` checks every row against the installed mteb where it is importable.

- BEIR: MTEB's BEIR retrieval tasks (``NFCorpus``, ``SciFact``, ``CQADupstack<Forum>Retrieval``, ...), on the split
  gapbench's ``beir/<name>`` evaluates by default (``dev`` for MS MARCO, ``test`` for the rest).
- BRIGHT: MTEB's BRIGHT(v1.1) tasks, one per domain (``BrightBiologyRetrieval``, ``BrightBiologyLongRetrieval``, split
  ``standard`` or ``long``). MTEB 2.26 marks its older ``BrightRetrieval`` (the domains as subsets) superseded by them;
  they apply BRIGHT's ``excluded_ids`` as gapbench does, the older task does not.
- RAR-b: MTEB's RAR-b tasks (``AlphaNLI``, ``ARCChallenge``, ``RARbMath``, ``TempReasonL1``, ...), the full-dataset
  retrieval setting (gapbench's ``rarb/<task>``; the multiple-choice ``rarb-mcr/...`` is not an MTEB task).

A task MTEB does not have (ImpliRet, OBLIQ, MuSiQue, a local collection, a variant with options such as BRIGHT's
reasoning queries or RAR-b's instructions) gets no row; the export names it ``NotInMTEB__<task>`` so that the file
name says so. So does the export for a task whose scores lack MTEB's main score for it (BRIGHT's long-document tasks:
MTEB ranks them by recall@1, which gapbench's ``bright/<domain>/long`` does not compute): under MTEB's name, another
measure would be read as MTEB's.
"""

from __future__ import annotations

from dataclasses import dataclass

NOT_IN_MTEB = "NotInMTEB__"  # the prefix of a task file whose task MTEB does not have


@dataclass(frozen=True)
class MtebTask:
    """An MTEB task: its ``name``, the ``split`` gapbench's scores go under, the ``subset`` (``hf_subset``), its
    ``languages`` (every task of the table is English) and MTEB's ``main_score`` for it."""

    name: str
    split: str = "test"
    subset: str = "default"
    languages: tuple[str, ...] = ("eng-Latn",)
    main_score: str = "ndcg_at_10"


_BEIR = {
    "msmarco": MtebTask("MSMARCO", "dev"), "trec-covid": MtebTask("TRECCOVID"), "nfcorpus": MtebTask("NFCorpus"),
    "nq": MtebTask("NQ"), "hotpotqa": MtebTask("HotpotQA"), "fiqa": MtebTask("FiQA2018"),
    "arguana": MtebTask("ArguAna"), "webis-touche2020": MtebTask("Touche2020"), "quora": MtebTask("QuoraRetrieval"),
    "dbpedia-entity": MtebTask("DBPedia"), "scidocs": MtebTask("SCIDOCS"), "fever": MtebTask("FEVER"),
    "climate-fever": MtebTask("ClimateFEVER"), "scifact": MtebTask("SciFact"),
}
_CQADUPSTACK = ("android", "english", "gaming", "gis", "mathematica", "physics", "programmers", "stats", "tex", "unix",
                "webmasters", "wordpress")
# gapbench's BRIGHT domain -> the middle of MTEB's task name
_BRIGHT = {
    "biology": "Biology", "earth_science": "EarthScience", "economics": "Economics", "psychology": "Psychology",
    "robotics": "Robotics", "stackoverflow": "Stackoverflow", "sustainable_living": "SustainableLiving",
    "pony": "Pony", "leetcode": "Leetcode", "aops": "Aops", "theoremqa_theorems": "TheoremQATheorems",
    "theoremqa_questions": "TheoremQAQuestions",
}
_BRIGHT_LONG = ("biology", "earth_science", "economics", "psychology", "robotics", "stackoverflow",
                "sustainable_living", "pony")
_RARB = {
    "alphanli": "AlphaNLI", "hellaswag": "HellaSwag", "piqa": "PIQA", "siqa": "SIQA", "quail": "Quail",
    "ARC-Challenge": "ARCChallenge", "winogrande": "WinoGrande", "spartqa": "SpartQA", "math-pooled": "RARbMath",
    "humanevalpack-mbpp-pooled": "RARbCode", "TempReason-l1": "TempReasonL1",
    "TempReason-l2-pure": "TempReasonL2Pure", "TempReason-l2-fact": "TempReasonL2Fact",
    "TempReason-l2-context": "TempReasonL2Context", "TempReason-l3-pure": "TempReasonL3Pure",
    "TempReason-l3-fact": "TempReasonL3Fact", "TempReason-l3-context": "TempReasonL3Context",
}

MTEB_TASKS: dict[str, MtebTask] = {
    **{f"beir/{name}": task for name, task in _BEIR.items()},
    **{f"beir/cqadupstack/{forum}": MtebTask(f"CQADupstack{forum.capitalize()}Retrieval") for forum in _CQADUPSTACK},
    **{f"bright/{domain}": MtebTask(f"Bright{mid}Retrieval", "standard") for domain, mid in _BRIGHT.items()},
    # MTEB scores BRIGHT's long-document setting by recall@1, as the BRIGHT paper does
    **{f"bright/{domain}/long": MtebTask(f"Bright{_BRIGHT[domain]}LongRetrieval", "long", main_score="recall_at_1")
       for domain in _BRIGHT_LONG},
    **{f"rarb/{name}": MtebTask(mteb) for name, mteb in _RARB.items()},
}


def mteb_task(task: str) -> MtebTask | None:
    """MTEB's task for a gapbench task name, or None where MTEB has none (a name with options never has one).

    >>> mteb_task("beir/nfcorpus")
    MtebTask(name='NFCorpus', split='test', subset='default', languages=('eng-Latn',), main_score='ndcg_at_10')
    >>> mteb_task("impliret/unispeaker/temporal") is None
    True
    """
    return MTEB_TASKS.get(task)
