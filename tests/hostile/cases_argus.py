"""The input files and options of ``gapbench argus ...`` and ``gapbench coverage``.

``argus audit|probe|sweep`` read an entities JSONL and a relations JSONL (or a folder from ``argus dataset build``),
``argus dataset build`` a Wikidata dump (JSON, N-Triples or the authors' relations JSONL; plain, gzip or bzip2) and a
paragraphs JSONL, ``argus kb build`` JSONL or abstracts XML. Every bad file is refused with one line naming the file
and line (or the id, or the option) before any model is loaded: malformed JSON, lines that are not objects, missing
keys and wrong types, empty files, duplicate ids, relations and candidates naming entities that do not exist, a
folder without its manifest or with another kind's, corrupt compressed dumps, and numeric options out of range.
``coverage``'s options are checked before its NER and embedding run. Tiny hand-made inputs with a BOM or CRLF line
ends are accepted (``-r random``: no model is loaded).
"""

from __future__ import annotations

import gzip
import json

from . import Case
from .cases_beir import F as BEIR, folder as beir_folder

ENTS, RELS, DS, OUT = "{tmp}/ents.jsonl", "{tmp}/rels.jsonl", "{tmp}/ds", "{tmp}/out"
WIKI, PARAS, KB = "{tmp}/latest-truthy.nt", "{tmp}/paras.jsonl", "{tmp}/kb.jsonl"

_ENTITIES = [
    {"qid": "Q1", "label": "apple", "paragraph": "The apple is the fruit of the apple tree."},
    {"qid": "Q2", "label": "orchard", "paragraph": "An orchard is a plantation of fruit trees."},
    {"qid": "Q3", "label": "banana", "paragraph": "The banana is an elongated edible fruit."},
    {"qid": "Q4", "label": "desert", "paragraph": "A desert is a barren area of landscape."},
    {"qid": "Q5", "label": "river", "paragraph": "A river is a natural flowing watercourse."},
    {"qid": "Q6", "label": "mountain", "paragraph": "A mountain is an elevated portion of the crust."},
]
_RELATIONS = [{"source": "Q1", "target": "Q2"}, {"source": "Q3", "target": "Q4"}, {"qid": "Q5", "related": ["Q6"]}]


def _jsonl(records) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def _with(records: list, line: str, at: int) -> str:
    """``records`` as JSONL with ``line`` inserted as line ``at``."""
    rows = [json.dumps(r) for r in records]
    return _jsonl(rows[:at - 1] + [line] + rows[at - 1:])


def audit(case_id: str, names=(), *, ents: str | bytes | None = None, rels: str | bytes | None = None,
          extra=(), expect: int = 2, command: str = "audit") -> Case:
    files = {"ents.jsonl": _jsonl(_ENTITIES) if ents is None else ents,
             "rels.jsonl": _jsonl(_RELATIONS) if rels is None else rels}
    budget = () if "--k" in extra or "--n" in extra else ("--k", "2", "--n", "4")
    plot = ("--no-plot",) if command == "audit" else ()
    argv = ["argus", command, "-r", "random", "--entities", ENTS, "--relations", RELS, "-o", OUT, *budget, *plot,
            *extra]
    return Case(case_id, argv, files=files, expect=expect, names=tuple(names))


def sweep(case_id: str, ns: str, ks: str, names=(), expect: int = 2) -> Case:
    return Case(case_id, ["argus", "sweep", "-r", "random", "--entities", ENTS, "--relations", RELS, "--n", ns,
                          "--k", ks, "-o", OUT, "--no-plot"],
                files={"ents.jsonl": _jsonl(_ENTITIES), "rels.jsonl": _jsonl(_RELATIONS)}, expect=expect,
                names=tuple(names))


# ---- a dataset folder as `argus dataset build` writes it: Q1 -> Q2 ranked against stored neutrals
_CANDIDATES = [{"target": "Q1", "related": "Q2", "candidates": ["Q3", "Q4", "Q5"]}]
_MANIFEST = {"kind": "argus_dataset", "version": 1,
             "inputs": {"wikidata": "latest-truthy.nt", "format": "ntriples", "paragraphs": "paras.jsonl"},
             "settings": {"targets": None, "candidates": 4, "seed": 0,
                          "neutral_rule": "no edge to the target or any of its 1-hop neighbours"},
             "counts": {"paragraphs": 6, "entities": 6, "edges_kept": 1, "targets_eligible": 1, "targets": 1,
                        "pairs": 1, "candidates": 3, "candidates_min": 3},
             "dropped": {"empty_paragraph": 0, "no_english_label": 0, "targets_without_related_entity": 5,
                         "targets_without_neutral": 0}}


def dataset(case_id: str, names=(), *, candidates: str | None = None, manifest: str | None = json.dumps(_MANIFEST),
            expect: int = 2) -> Case:
    files = {"ds/entities.jsonl": _jsonl(_ENTITIES), "ds/relations.jsonl": _jsonl([{"qid": "Q1", "related": ["Q2"]}]),
             "ds/candidates.jsonl": _jsonl(_CANDIDATES) if candidates is None else candidates}
    if manifest is not None:
        files["ds/argus_dataset.json"] = manifest
    return Case(case_id, ["argus", "audit", "-r", "random", "--dataset", DS, "--k", "1", "--n", "4", "-o", OUT,
                          "--no-plot"], files=files, expect=expect, names=tuple(names))


# ---- `argus dataset build`: a truthy N-Triples dump and first paragraphs
def _triple(s: str, p: str, o: str) -> str:
    return f"<http://www.wikidata.org/entity/{s}> <http://www.wikidata.org/prop/direct/{p}> " \
           f"<http://www.wikidata.org/entity/{o}> .\n"


def _label(s: str, text: str) -> str:
    return f'<http://www.wikidata.org/entity/{s}> <http://www.w3.org/2000/01/rdf-schema#label> "{text}"@en .\n'


_NT = "".join([_triple("Q1", "P361", "Q2"), _triple("Q3", "P31", "Q4")]
              + [_label(e["qid"], e["label"]) for e in _ENTITIES])
_PARAS = _jsonl({"qid": e["qid"], "text": e["paragraph"]} for e in _ENTITIES)


def build(case_id: str, names=(), *, dump: str | bytes = _NT, dump_name: str = "latest-truthy.nt",
          paras: str = _PARAS, extra=(), expect: int = 2) -> Case:
    return Case(case_id, ["argus", "dataset", "build", "--wikidata", f"{{tmp}}/{dump_name}", "--paragraphs", PARAS,
                          "-o", DS, "--candidates", "3", *extra],
                files={dump_name: dump, "paras.jsonl": paras}, expect=expect, names=tuple(names))


# ---- `argus kb build`
_KB = [{"id": "Apple", "title": "Apple", "text": "An apple is a fruit."},
       {"id": "Banana", "title": "Banana", "text": "A banana is a fruit."}]


def kb(case_id: str, content: str | bytes, names=(), *, name: str = "kb.jsonl", extra=(), expect: int = 2) -> Case:
    return Case(case_id, ["argus", "kb", "build", f"{{tmp}}/{name}", "-o", "{tmp}/out.jsonl", *extra],
                files={name: content}, expect=expect, names=tuple(names))


# ---- `coverage` options, on a tiny BEIR folder (checked before any NER or embedding)
def coverage(case_id: str, extra, names) -> Case:
    return Case(case_id, ["coverage", BEIR, "-r", "bm25", "--embedder", "random", *extra], files=beir_folder(),
                names=tuple(names))


_E2 = json.dumps(_ENTITIES[1])

CASES = [
    # ---- entities JSONL
    audit("entities-bad-json", (ENTS, "line 3", "malformed JSON"), ents=_with(_ENTITIES, '{"qid": "Q9", ', 3)),
    audit("entities-not-object", (ENTS, "line 2", "JSON object"), ents=_with(_ENTITIES, '["Q9", "x"]', 2)),
    audit("entities-no-qid", (ENTS, "line 2", '"qid"'), ents=_with(_ENTITIES, '{"label": "x", "paragraph": "y"}', 2)),
    audit("entities-empty-paragraph", (ENTS, "line 2", "'Q9'", '"paragraph"'),
          ents=_with(_ENTITIES, '{"qid": "Q9", "label": "x", "paragraph": "  "}', 2)),
    audit("entities-duplicate-qid", (ENTS, "line 7", "'Q2'", "twice"), ents=_jsonl(_ENTITIES + [_E2])),
    # ---- relations JSONL
    audit("relations-bad-json", (RELS, "line 2", "malformed JSON"), rels=_with(_RELATIONS, '{"source": "Q1"', 2)),
    audit("relations-unknown-keys", (RELS, "line 1", "from"), rels=_with(_RELATIONS, '{"from": "Q1", "to": "Q2"}', 1)),
    audit("relations-empty", (RELS, "no relation"), rels=""),
    audit("relations-unknown-entities", (RELS, "'Q77'", ENTS),
          rels=_jsonl([{"source": "Q77", "target": "Q78"}, {"source": "Q1", "target": "Q99"}])),
    Case("entities-without-relations", ["argus", "audit", "-r", "random", "--entities", ENTS, "-o", OUT],
         files={"ents.jsonl": _jsonl(_ENTITIES)}, names=("--relations",)),
    # ---- options
    audit("audit-k-zero", ("--k", "0"), extra=("--k", "0", "--n", "4")),
    audit("audit-n-one", ("--n", "1"), extra=("--k", "2", "--n", "1")),
    audit("audit-relation-mode", ("--relation-mode", "sideways"), extra=("--relation-mode", "sideways")),
    audit("probe-tau-two", ("--tau", "2"), command="probe", extra=("--tau", "2", "--families", "ridge")),
    sweep("sweep-n-not-integers", "4,abc", "1", ("--n", "4,abc")),
    sweep("sweep-k-zero", "4", "0,1", ("--k", "at least 1")),
    # ---- dataset folders
    dataset("dataset-no-manifest", (f"{DS}/argus_dataset.json", "argus dataset build"), manifest=None),
    dataset("dataset-other-kind", (f"{DS}/argus_dataset.json", "argus_audit"),
            manifest=json.dumps({**_MANIFEST, "kind": "argus_audit"})),
    dataset("dataset-candidate-unknown", (f"{DS}/candidates.jsonl", "line 1", "'Q42'"),
            candidates=_jsonl([{"target": "Q1", "related": "Q2", "candidates": ["Q3", "Q42"]}])),
    # ---- dataset build: dumps and paragraphs
    build("build-corrupt-gzip", ("{tmp}/latest-truthy.nt.gz",), dump=b"\x1f\x8b\x08\x00garbage, not deflate",
          dump_name="latest-truthy.nt.gz"),
    build("build-corrupt-bz2", ("{tmp}/latest-truthy.nt.bz2", "bzip2"), dump=b"BZh9 this is no bzip2 stream",
          dump_name="latest-truthy.nt.bz2"),
    build("build-unknown-dump-name", ("{tmp}/dump.txt", "latest-truthy.nt"), dump_name="dump.txt"),
    build("build-bad-triple", (WIKI, "line 2", "N-Triples"), dump=_triple("Q1", "P1", "Q2") + "Q1 P31 Q2\n"),
    build("build-paragraph-bad-qid", (PARAS, "line 2", '"qid"'), paras=_PARAS.replace('"Q2"', '"apple"', 1)),
    build("build-no-paragraphs", (PARAS, "no paragraphs"), paras="\n"),
    build("build-no-pairs", (WIKI, "no target", PARAS), dump="".join(_label(e["qid"], e["label"]) for e in _ENTITIES)),
    build("build-candidates-one", ("candidates", "1"), extra=("--candidates", "1")),
    build("build-ok-gzip-crlf", (), dump=gzip.compress(_NT.replace("\n", "\r\n").encode()),
          dump_name="latest-truthy.nt.gz", expect=0),
    # ---- kb build
    kb("kb-missing-text", _with(_KB, '{"id": "C", "body": "c"}', 2), ("{tmp}/kb.jsonl", "line 2", '"text"')),
    kb("kb-all-empty", _jsonl({**r, "text": " "} for r in _KB), ("{tmp}/kb.jsonl", "non-empty")),
    Case("kb-source-folder", ["argus", "kb", "build", "{tmp}/kbs", "-o", "{tmp}/out.jsonl"],
         files={"kbs/kb.jsonl": _jsonl(_KB)}, names=("'{tmp}/kbs'", "is a folder")),
    kb("kb-bad-xml", "<feed><doc><title>Wikipedia: A</title>\n<abstract>x</doc></feed>\n",
       ("{tmp}/abstract.xml", "line 2"), name="abstract.xml"),
    kb("kb-ok-bom-duplicates", b"\xef\xbb\xbf" + _jsonl(_KB + _KB).encode(), (), expect=0),
    # ---- argus compare --kb FILE: a reference KB a comparison reads (it is not rebuilt by kb build)
    Case("compare-kb-duplicate-id", ["argus", "compare", "impliret/multispeaker/wknow", "-r", "bm25", "--kb", KB,
                                     "--variants", "original,expansion"], files={"kb.jsonl": _jsonl(_KB + _KB[:1])},
         names=(KB, f"line {len(_KB) + 1}", f"{_KB[0]['id']!r} is given again (first on line 1)")),
    Case("compare-kb-empty-text", ["argus", "compare", "impliret/multispeaker/wknow", "-r", "bm25", "--kb", KB,
                                   "--variants", "original,expansion"],
         files={"kb.jsonl": _jsonl([*_KB, {"id": "Z", "title": "z", "text": "  "}])},
         names=(KB, f"line {len(_KB) + 1}", "'Z' has an empty text")),
    # ---- coverage options
    coverage("coverage-entity-candidates-zero", ("--entity-candidates", "0"), ("--entity-candidates", "0")),
    coverage("coverage-clusters-zero", ("--clusters", "0"), ("--clusters", "0")),
    coverage("coverage-k-range-one", ("--k-range", "1"), ("--k-range", "2")),
    coverage("coverage-resamples-zero", ("--resamples", "0"), ("--resamples", "0")),
    coverage("coverage-max-chars-negative", ("--max-chars", "-5"), ("--max-chars", "-5")),
    # ---- valid inputs: BOM and CRLF accepted
    audit("audit-ok-bom-crlf", (), ents=b"\xef\xbb\xbf" + _jsonl(_ENTITIES).replace("\n", "\r\n").encode(),
          rels=_jsonl(_RELATIONS).replace("\n", "\r\n"), expect=0),
    dataset("dataset-ok", (), expect=0),
]
