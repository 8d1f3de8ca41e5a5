"""ARGUS dataset builder: both Wikidata dump formats (plain, gzip, bzip2), the KG-disjoint neutral rule on every stored
candidate, hand-checked counts, the audit reading stored candidates, and named errors for malformed lines.

The tiny dump below is a FORMAT FIXTURE written for these tests (not real Wikidata): 10 items, hand-checkable.
No real dump-format records for the shipped slice's QIDs were found, so the shipped-slice test re-expresses the
authors' real 1-hop relations (tasks/data/argus) as truthy triples; their property ids are not in the slice, so
``P0`` stands for "some property".
"""

from __future__ import annotations

import bz2
import gzip
import json

import pytest

from gapbench.analyses.argus.audit import retrievability as aa
from gapbench.analyses.argus.audit.rps_dataset import load_dataset
from gapbench.analyses.argus.tools import wikidata as ds
from gapbench.errors import ConfigError, DataFormatError

E, WDT = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"

# item -> (English label or None, [(property, item)]); Q9 and Q11 have no paragraph; Q5 -> Q1 is deprecated (JSON
# only: the truthy dump leaves deprecated statements out)
GRAPH = {
    "Q1": ("Alpha", [("P31", "Q2"), ("P17", "Q9")]),
    "Q2": ("Beta", [("P361", "Q3")]),
    "Q3": ("Gamma", []),
    "Q4": ("Delta", [("P17", "Q9")]),
    "Q5": ("Epsilon", []),
    "Q6": ("Zeta", [("P31", "Q7")]),
    "Q7": ("Eta", []),
    "Q8": (None, []),
    "Q9": ("Nine", [("P31", "Q11")]),
}
PARAGRAPHS = {q: f"{(GRAPH[q][0] or 'Acht')} is a thing." for q in ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8")}
PARAGRAPHS["Q10"] = "  "


def _claim(prop: str, qid: str, rank: str = "normal") -> dict:
    return {"mainsnak": {"snaktype": "value", "property": prop, "datavalue": {
        "value": {"entity-type": "item", "numeric-id": int(qid[1:]), "id": qid}, "type": "wikibase-entityid"}},
        "type": "statement", "rank": rank}


def json_dump_text() -> str:
    lines = []
    for q, (label, claims) in GRAPH.items():
        cl: dict = {}
        for p, o in claims:
            cl.setdefault(p, []).append(_claim(p, o))
        if q == "Q5":
            cl["P31"] = [_claim("P31", "Q1", "deprecated")]
        cl["P1448"] = [{"mainsnak": {"snaktype": "value", "property": "P1448", "datavalue": {
            "value": {"text": "x", "language": "en"}, "type": "monolingualtext"}}, "rank": "normal"}]
        labels = {"de": {"language": "de", "value": "Acht"}} if label is None else {"en": {"language": "en",
                                                                                        "value": label}}
        lines.append(json.dumps({"type": "item", "id": q, "labels": labels, "claims": cl}))
    lines.append(json.dumps({"type": "property", "id": "P31", "labels": {"en": {"value": "instance of"}}}))
    return "[\n" + ",\n".join(lines) + "\n]\n"


def nt_dump_text() -> str:
    out = [f'<{E}P31> <{RDFS_LABEL}> "instance of"@en .']
    for q, (label, claims) in GRAPH.items():
        out.append(f'<{E}{q}> <{RDFS_LABEL}> "{label}"@en .' if label else f'<{E}{q}> <{RDFS_LABEL}> "Acht"@de .')
        out.append(f'<{E}{q}> <http://schema.org/name> "{label or "Acht"}"@de .')
        out.append(f'<{E}{q}> <{WDT}P569> "2001-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .')
        out += [f"<{E}{q}> <{WDT}{p}> <{E}{o}> ." for p, o in claims]
    return "\n".join(out) + "\n"


def _write(path, text: str):
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    elif path.name.endswith(".bz2"):
        path.write_bytes(bz2.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.fixture()
def kb(tmp_path):
    p = tmp_path / "kb.jsonl"
    p.write_text("".join(json.dumps({"qid": q, "text": t}) + "\n" for q, t in PARAGRAPHS.items()))
    return p


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", ["latest-all.json", "latest-all.json.gz", "latest-all.json.bz2",
                                  "latest-truthy.nt", "latest-truthy.nt.gz", "latest-truthy.nt.bz2"])
def test_build_both_formats_hand_counts(tmp_path, kb, name):
    dump = _write(tmp_path / name, json_dump_text() if ".json" in name else nt_dump_text())
    m = ds.build_dataset(dump, kb, tmp_path / "out", candidates=800, seed=0)
    # kept: Q1-Q7 (Q8 has no English label, Q10 an empty paragraph); edges touching a paragraph item: Q1-Q2, Q1-Q9,
    # Q2-Q3, Q4-Q9, Q6-Q7 (Q9-Q11 touches none; Q5 -> Q1 is deprecated)
    assert m["counts"] == {"paragraphs": 9, "entities": 7, "edges_kept": 5, "targets_eligible": 3, "targets": 3,
                           "pairs": 3, "candidates": 12, "candidates_min": 3}
    assert m["dropped"] == {"empty_paragraph": 1, "no_english_label": 1, "targets_without_related_entity": 4,
                            "targets_without_neutral": 0}
    out = tmp_path / "out"
    assert _jsonl(out / "relations.jsonl") == [{"qid": "Q1", "related": ["Q2"]}, {"qid": "Q2", "related": ["Q3"]},
                                               {"qid": "Q6", "related": ["Q7"]}]
    # Q1: blocked {Q1, Q2, Q9} and their neighbours {Q3, Q4} -> Q5 Q6 Q7; Q2: blocked Q1 Q2 Q3 Q9; Q6: blocked Q6 Q7
    assert {(r["target"], r["related"]): r["candidates"] for r in _jsonl(out / "candidates.jsonl")} == {
        ("Q1", "Q2"): ["Q5", "Q6", "Q7"], ("Q2", "Q3"): ["Q4", "Q5", "Q6", "Q7"],
        ("Q6", "Q7"): ["Q1", "Q2", "Q3", "Q4", "Q5"]}
    ents = _jsonl(out / "entities.jsonl")
    assert [e["qid"] for e in ents] == ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"]
    assert ents[0] == {"qid": "Q1", "label": "Alpha", "paragraph": "Alpha is a thing."}


def test_candidates_are_sampled_and_seeded(tmp_path, kb):
    dump = _write(tmp_path / "d.nt", nt_dump_text())
    m = ds.build_dataset(dump, kb, tmp_path / "a", candidates=3, seed=0)
    assert m["counts"]["candidates"] == 6 and m["counts"]["candidates_min"] == 2  # N - 1 = 2 neutrals per pair
    ds.build_dataset(dump, kb, tmp_path / "b", candidates=3, seed=0)
    assert (tmp_path / "a" / "candidates.jsonl").read_text() == (tmp_path / "b" / "candidates.jsonl").read_text()
    one = ds.build_dataset(dump, kb, tmp_path / "c", targets=1, seed=0)
    assert one["counts"]["targets"] == 1 and one["counts"]["targets_eligible"] == 3


def test_audit_uses_stored_candidates(tmp_path, kb):
    dump = _write(tmp_path / "d.json", json_dump_text())
    ds.build_dataset(dump, kb, tmp_path / "out", candidates=800)
    data = load_dataset(tmp_path / "out")
    assert data.candidates[("Q1", "Q2")] == ("Q5", "Q6", "Q7")
    res = aa.audit(data, "random", k=1, n=800)
    # the target plus its stored neutrals (3, 4 and 5). The default pool (no edge to the query, from the relations
    # file alone) also holds Q4 for (Q1, Q2) and Q1, the target's own neighbour, for (Q2, Q3)
    assert res.n_candidates == {"Q1": [4], "Q2": [5], "Q6": [6]}
    default = aa.audit(aa.load_jsonl(tmp_path / "out" / "entities.jsonl", tmp_path / "out" / "relations.jsonl"),
                       "random", k=1, n=800)
    assert default.n_candidates == {"Q1": [5], "Q2": [6], "Q6": [6]}


def test_shipped_slice_every_candidate_is_disjoint(tmp_path):
    """The authors' 103 targets / 695 Wikidata relations (their processed file, read as it is shipped) over the shipped
    620 Wikipedia first paragraphs."""
    d = aa.data_dir()
    rel = _jsonl(d / "entity_relations_with_contriever_ranks.jsonl")
    dump = d / "entity_relations_with_contriever_ranks.jsonl"
    assert ds.dump_format(dump) == "relations"
    m = ds.build_dataset(dump, d / "kb_wikipedia_first_paragraphs.jsonl", tmp_path / "out", candidates=800)
    # 620 paragraphs, 31 without an English label (test_argus_audit's fingerprint); all 695 edges kept
    assert m["counts"]["paragraphs"] == 620 and m["counts"]["entities"] == 589 and m["counts"]["edges_kept"] == 695
    assert m["dropped"]["no_english_label"] == 31
    nbr: dict[str, set[str]] = {}
    for r in rel:
        for t in r["related_tags"]:
            nbr.setdefault(r["qid"], set()).add(t["qid"])
            nbr.setdefault(t["qid"], set()).add(r["qid"])
    rows = _jsonl(tmp_path / "out" / "candidates.jsonl")
    assert len(rows) == m["counts"]["pairs"] and m["counts"]["targets"] == 103
    for row in rows:
        x, t = row["target"], row["related"]
        assert t in nbr[x]
        close = {x} | nbr[x]
        for z in row["candidates"]:
            assert z not in close and not (nbr.get(z, set()) & close), (x, t, z)
    assert m["counts"]["candidates"] == sum(len(r["candidates"]) for r in rows)


@pytest.mark.parametrize("name,text,line,needle", [
    ("d.json", '[\n{"type": "item", "id": "Q1"},\n{"type": "item", "id": \n]\n', 3, "malformed JSON"),
    ("d.json.gz", '[\n["not", "an", "entity"],\n]\n', 2, 'entity object with an "id"'),
    ("d.nt", f"<{E}Q1> <{WDT}P31> <{E}Q2> .\n<{E}Q1> <{WDT}P31> Q2 .\n", 2, "not an N-Triples statement"),
    ("d.nt.bz2", f'<{E}Q1> <{RDFS_LABEL}> "A"@en .\n<{E}Q1> <{WDT}P31>\n', 2, "not an N-Triples statement"),
    ("my_relations.jsonl", '{"qid": "Q1", "label": "A", "related_tags": [{"qid": "Q2", "label": "B"}]}\n'
                           '{"qid": "Q3", "label": "C", "related_tags": [{"label": "D"}]}\n', 2,
     'target Q3: every related tag needs a "qid"'),
    ("my_relations.jsonl.gz", '{"qid": "Q1", "related_tags": "Q2"}\n', 1, '"related_tags": [{"qid", "label"}]'),
])
def test_malformed_lines_are_named(tmp_path, kb, name, text, line, needle):
    dump = _write(tmp_path / name, text)
    with pytest.raises(DataFormatError) as err:
        ds.build_dataset(dump, kb, tmp_path / "out")
    assert err.value.line == line and needle in str(err.value) and name in str(err.value)


def test_bad_paragraphs_and_names(tmp_path, kb):
    bad = tmp_path / "kb.jsonl"
    bad.write_text('{"qid": "Q1", "text": "x"}\n{"qid": 7, "text": "y"}\n')
    dump = _write(tmp_path / "d.nt", nt_dump_text())
    with pytest.raises(DataFormatError, match=r"kb\.jsonl, line 2: .*Wikidata item id"):
        ds.build_dataset(dump, bad, tmp_path / "out")
    with pytest.raises(ConfigError, match="latest-truthy.nt"):
        ds.build_dataset(tmp_path / "dump.xml", kb, tmp_path / "out")
    # the library names its settings (the command names its flags)
    with pytest.raises(ConfigError, match=r"^candidates \(N, the candidate-set size\) must be at least 2, got 1\.$"):
        ds.build_dataset(dump, kb, tmp_path / "out", candidates=1)
    with pytest.raises(ConfigError, match=r"^targets must be at least 1, got 0; leave it out \(None\)"):
        ds.build_dataset(dump, kb, tmp_path / "out", targets=0)


def test_cli_build(tmp_path, kb):
    from gapbench.cli import main
    dump = _write(tmp_path / "latest-all.json.gz", json_dump_text())
    assert main(["argus", "dataset", "build", "--wikidata", str(dump), "--paragraphs", str(kb), "--out",
                 str(tmp_path / "out"), "--candidates", "3"]) == 0
    m = json.loads((tmp_path / "out" / "argus_dataset.json").read_text())
    assert m["counts"]["pairs"] == 3 and m["inputs"]["format"] == "json"
