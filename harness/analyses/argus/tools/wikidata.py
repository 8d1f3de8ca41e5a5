"""Build an ARGUS RPS dataset (targets, related tags, stored neutral candidates) from a Wikidata dump.

ARGUS (Taghavi et al., section 3.1 and appendices B.1-B.3) aligns Wikidata entities with their Wikipedia first
paragraphs, takes each target's 1-hop Wikidata neighbours as related tags (queries) and ranks the target against
``N - 1`` neutral entities per tag. :func:`build_dataset` reads, as streams:

- a Wikidata dump in either published format:

  - the JSON dump (``latest-all.json[.gz|.bz2]``): a JSON array with one entity per line, lines ending with ``,``;
    item-valued claims (``mainsnak.datavalue.value.id`` of a ``Q`` item, any rank but ``deprecated``) become edges,
    ``labels.en.value`` the label;
  - the truthy N-Triples dump (``latest-truthy.nt[.gz|.bz2]``): ``<.../entity/Q1> <.../prop/direct/P31>
    <.../entity/Q2> .`` lines become edges, ``rdfs:label`` / ``schema:name`` literals tagged ``@en`` the label; every
    other well-formed triple is skipped;
  - or the ARGUS authors' processed relations (``*relations*.jsonl[.gz]``, as shipped in
    ``tasks/data/argus/entity_relations_with_contriever_ranks.jsonl``): one target per line, ``{qid, label,
    related_tags: [{qid, label}]}``, their 1-hop Wikidata edges with English labels (properties not kept);

- a Wikipedia first-paragraph JSONL ``{qid, text}`` (the format of ``tasks/data/argus/kb_wikipedia_first_paragraphs
  .jsonl``), read first so that only edges touching a paragraph entity are kept in memory.

Rules, and where gapbench deviates from the paper:

- an *entity* has a paragraph and an English label; entities without one are dropped and counted (the paper also
  discards unparseable or very short paragraphs; gapbench keeps any non-empty one, and grounds labels that are absent
  from the paragraph at audit time by prepending them, as the paper does);
- a *target*'s related tags are its outgoing item-valued claims to other entities (the authors' related tags are the
  target's own statements; edges read undirected serve only the disjointness rule below);
- *neutral candidates* for (target ``x``, tag ``t``): entities sharing no Wikidata edge, in either direction, with
  ``x`` or any 1-hop neighbour of ``x`` (``t`` included), and not ``x`` itself. This is stricter than the paper's
  rule (no edge to ``t`` only, appendix B.3) and matches its Figure 1 ("2-hop neighbours ... strict disjointness").
  Neighbours are taken from every kept edge, including edges to items without a paragraph;
- ``candidates`` (``N``, default 800) is the candidate-set size: ``N - 1`` neutrals are stored per pair (all of them
  when fewer are eligible), drawn without replacement by a generator seeded with ``(seed, x, t)``;
- ``targets``: a seeded sample of that many eligible targets (default: all); a target with no eligible neutral is
  dropped and counted.

Output (``DIR``): ``entities.jsonl`` ``{qid, label, paragraph}`` and ``relations.jsonl`` ``{qid, related: [...]}``
(what ``gapbench argus audit --entities --relations`` reads), ``candidates.jsonl`` ``{target, related, candidates:
[...]}`` one line per pair, and ``argus_dataset.json`` (the manifest: inputs, settings, counts, dropped
entities by reason).
:func:`gapbench.analyses.argus.audit.rps_dataset.load_dataset` reads the folder back as audit data with its stored
candidates, so the audit ranks against them::

    build_dataset("latest-truthy.nt.bz2", "kb.jsonl", "rps/", candidates=800, seed=0)
    data = load_dataset("rps/")

A tool beside the analysis rather than part of it: it reads a Wikidata dump once to write a dataset folder, which
the audit, the probe and the sweep then read like any other input.
"""

from __future__ import annotations

import bz2
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ....errors import ConfigError, DataFormatError
from ....files import output_folder
from ....formats import read_jsonl, text_lines, write_jsonl
from ....schemas import validate_analysis
from ..audit.audit_files import write_json
from ..audit.rps import draw_neutrals
from ..audit.rps_dataset import FILES

ENTITY = "http://www.wikidata.org/entity/"
DIRECT = "http://www.wikidata.org/prop/direct/"
LABEL_PREDICATES = ("http://www.w3.org/2000/01/rdf-schema#label", "http://schema.org/name")

_IRI = r"<([^<>\s]*)>"
_LITERAL = r'"((?:[^"\\]|\\.)*)"(?:@([A-Za-z0-9-]+)|\^\^<[^<>\s]*>)?'
_TRIPLE = re.compile(rf"^(?:{_IRI}|_:\S+)\s+{_IRI}\s+(?:{_IRI}|_:\S+|{_LITERAL})\s*\.\s*(?:#.*)?$")
_QID = re.compile(r"^Q[1-9][0-9]*$")
_UCHAR = re.compile(r"\\U([0-9A-Fa-f]{8})")


@dataclass(frozen=True)
class Graph:
    """What a dump gives: undirected neighbour sets, outgoing claims (in dump order) and English labels."""

    neighbours: dict[str, set[str]]
    outgoing: dict[str, dict[str, None]]
    labels: dict[str, str]
    edges: int


# ---------------------------------------------------------------- reading dumps
def dump_format(path: Path) -> str:
    """``json``, ``ntriples`` or ``relations`` (the authors' processed JSONL), from the file name (``.json``/``.nt``/
    ``relations...jsonl``, optionally ``.gz``/``.bz2``)."""
    name = path.name.lower()
    for suffix in (".gz", ".bz2"):
        name = name.removesuffix(suffix)
    if name.endswith(".jsonl") and "relations" in name:
        return "relations"
    if name.endswith(".json") or name.endswith(".jsonl"):
        return "json"
    if name.endswith(".nt"):
        return "ntriples"
    raise ConfigError(f"{path}: cannot tell the Wikidata dump format from the name; accepted: latest-all.json"
                      "[.gz|.bz2] (the JSON dump), latest-truthy.nt[.gz|.bz2] (the truthy N-Triples dump) or "
                      "*relations*.jsonl[.gz] (the ARGUS authors' processed relations).")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text): gzip through gapbench's reader, bzip2 (the dumps' other compression) here."""
    if path.name.lower().endswith(".bz2"):
        try:
            with bz2.open(path, "rt", encoding="utf-8") as fh:
                yield from enumerate((line.rstrip("\r\n") for line in fh), 1)
        except FileNotFoundError:
            raise DataFormatError("file not found; check the path.", path=path) from None
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise DataFormatError(f"unreadable bzip2 file ({exc}).", path=path) from None
        return
    yield from text_lines(path)


def json_dump_records(path: Path) -> Iterator[tuple[int, str, str | None, list[str]]]:
    """(line, qid, English label, item-valued claim targets) per entity line of the JSON dump."""
    for n, line in _lines(path):
        text = line.strip()
        if text in ("", "[", "]"):
            continue
        try:
            obj = json.loads(text[:-1] if text.endswith(",") else text)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"malformed JSON ({exc.msg}: column {exc.colno}); a Wikidata JSON dump holds one "
                                  "entity object per line, ending with ','.", path=path, line=n) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            raise DataFormatError('expected an entity object with an "id" (one per line of the JSON dump).',
                                  path=path, line=n)
        claims = obj.get("claims") or {}
        if not isinstance(claims, dict):
            raise DataFormatError(f'entity {obj["id"]}: "claims" must be an object of property -> statements.',
                                  path=path, line=n)
        label = ((obj.get("labels") or {}).get("en") or {}).get("value")
        yield n, obj["id"], label if isinstance(label, str) else None, list(_claim_items(claims))


def _claim_items(claims: dict) -> Iterator[str]:
    for statements in claims.values():
        for st in statements if isinstance(statements, list) else ():
            if not isinstance(st, dict) or st.get("rank") == "deprecated":
                continue
            value = ((st.get("mainsnak") or {}).get("datavalue") or {}).get("value")
            target = value.get("id") if isinstance(value, dict) else None
            if isinstance(target, str) and _QID.match(target):
                yield target


def _unescape(literal: str) -> str:
    literal = _UCHAR.sub(lambda m: chr(int(m.group(1), 16)), literal)
    return json.loads(f'"{literal}"')


def ntriples_records(path: Path) -> Iterator[tuple[int, str, str | None, list[str]]]:
    """(line, subject qid, English label or None, [object qid]) per useful truthy triple; others are skipped."""
    for n, line in _lines(path):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        m = _TRIPLE.match(text)
        if m is None:
            raise DataFormatError("not an N-Triples statement (<subject> <predicate> <object> .); the truthy dump "
                                  "holds one triple per line.", path=path, line=n)
        subj, pred, obj, literal, lang = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
        qid = subj[len(ENTITY):] if subj and subj.startswith(ENTITY) else ""
        if not _QID.match(qid):
            continue
        if pred.startswith(DIRECT) and obj and obj.startswith(ENTITY) and _QID.match(obj[len(ENTITY):]):
            yield n, qid, None, [obj[len(ENTITY):]]
        elif pred in LABEL_PREDICATES and literal is not None and (lang or "").lower() == "en":
            try:
                yield n, qid, _unescape(literal), []
            except json.JSONDecodeError:
                raise DataFormatError("bad escape in a string literal.", path=path, line=n) from None


def relations_records(path: Path) -> Iterator[tuple[int, str, str | None, list[str]]]:
    """(line, qid, English label, [related qid]) per target of the authors' processed relations, and (line, related
    qid, its label, []) for each of its related tags (their labels are known there too)."""
    for n, obj in read_jsonl(path):
        qid, tags = obj.get("qid"), obj.get("related_tags")
        if not isinstance(qid, str) or not _QID.match(qid) or not isinstance(tags, list):
            raise DataFormatError('expected {"qid": "Q...", "label": "...", "related_tags": [{"qid", "label"}]}.',
                                  path=path, line=n)
        related = []
        for tag in tags:
            t = tag.get("qid") if isinstance(tag, dict) else None
            if not isinstance(t, str) or not _QID.match(t):
                raise DataFormatError(f'target {qid}: every related tag needs a "qid" (Q...), got {tag!r:.60}.',
                                      path=path, line=n)
            related.append(t)
        label = obj.get("label")
        yield n, qid, label if isinstance(label, str) and label != qid else None, related
        for tag in tags:
            tag_label = tag.get("label")
            if isinstance(tag_label, str) and tag_label != tag["qid"]:  # the authors write the qid when unlabelled
                yield n, tag["qid"], tag_label, []


_READERS = {"json": json_dump_records, "ntriples": ntriples_records, "relations": relations_records}


def read_graph(path: Path, keep: set[str]) -> Graph:
    """Edges with at least one end in ``keep`` (and labels of ``keep``) from a dump, streamed line by line."""
    records = _READERS[dump_format(path)](path)
    neighbours: dict[str, set[str]] = {}
    outgoing: dict[str, dict[str, None]] = {}
    labels: dict[str, str] = {}
    edges: set[tuple[str, str]] = set()
    for _, qid, label, targets in records:
        if label is not None and qid in keep:
            labels.setdefault(qid, label.strip())
        for t in targets:
            if t == qid or (qid not in keep and t not in keep) or (qid, t) in edges:
                continue
            edges.add((qid, t))
            neighbours.setdefault(qid, set()).add(t)
            neighbours.setdefault(t, set()).add(qid)
            outgoing.setdefault(qid, {})[t] = None
    return Graph(neighbours, outgoing, labels, len(edges))


def read_paragraphs(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, obj in read_jsonl(path):
        qid, text = obj.get("qid"), obj.get("text", obj.get("paragraph"))
        if not isinstance(qid, str) or not _QID.match(qid):
            raise DataFormatError('expected {"qid": "Q...", "text": "..."}: "qid" must be a Wikidata item id.',
                                  path=path, line=n)
        if not isinstance(text, str):
            raise DataFormatError(f'entity {qid}: "text" must be a string.', path=path, line=n)
        out.setdefault(qid, text.strip())
    if not out:
        raise DataFormatError('no paragraphs found; expected one {"qid": "Q...", "text": "..."} object per line.',
                              path=path)
    return out


# ---------------------------------------------------------------- the dataset
def neutral_pool(x: str, graph: Graph, entities: list[str]) -> list[str]:
    """Entities with no edge to ``x`` or to any 1-hop neighbour of ``x`` (either direction), ``x`` excluded."""
    nbrs = graph.neighbours.get(x, set())
    blocked = {x} | nbrs
    for nb in nbrs:
        blocked |= graph.neighbours.get(nb, set())
    return [q for q in entities if q not in blocked]


def sample_candidates(pool: list[str], size: int, seed: int, x: str, t: str) -> list[str]:
    """The pair's stored neutrals: the audit's own seeded draw (:func:`~..audit.rps.draw_neutrals`), in pool order."""
    if len(pool) <= size:
        return list(pool)
    return [pool[i] for i in sorted(draw_neutrals(len(pool), size, seed, x, t))]


def select_entities(paragraphs: dict[str, str], graph: Graph) -> tuple[list[str], dict[str, int]]:
    kept, dropped = [], {"empty_paragraph": 0, "no_english_label": 0}
    for q, text in paragraphs.items():
        if not text:
            dropped["empty_paragraph"] += 1
        elif not graph.labels.get(q):
            dropped["no_english_label"] += 1
        else:
            kept.append(q)
    return kept, dropped


def build_dataset(wikidata: str | Path, paragraphs: str | Path, out: str | Path, *, targets: int | None = None,
                  candidates: int = 800, seed: int = 0) -> dict:
    """Write entities/relations/candidates JSONL and the manifest (argus_dataset.json) into ``out``; returns it."""
    if candidates < 2:
        raise ConfigError(f"candidates (N, the candidate-set size) must be at least 2, got {candidates}.")
    if targets is not None and targets < 1:
        raise ConfigError(f"targets must be at least 1, got {targets}; leave it out (None) to keep every target.")
    wikidata, paragraphs = Path(wikidata), Path(paragraphs)
    dump_format(wikidata)  # a bad name fails before the paragraphs are read
    texts = read_paragraphs(paragraphs)
    graph = read_graph(wikidata, set(texts))
    entities, dropped = select_entities(texts, graph)
    known = set(entities)
    related = {x: [t for t in graph.outgoing.get(x, {}) if t in known] for x in entities}
    eligible = [x for x in entities if related[x]]
    pools = {x: neutral_pool(x, graph, entities) for x in eligible}
    chosen = [x for x in eligible if pools[x]]
    if targets is not None and targets < len(chosen):
        pick = np.random.default_rng(seed).choice(len(chosen), size=targets, replace=False)
        chosen = [chosen[i] for i in sorted(pick)]
    rows = [{"target": x, "related": t, "candidates": sample_candidates(pools[x], candidates - 1, seed, x, t)}
            for x in chosen for t in related[x]]
    if not rows:  # an empty dataset would only fail later, in the audit, far from its cause
        raise DataFormatError(f"no target to store: of {len(texts)} paragraph entities, {len(entities)} have an "
                              f"English label in this dump, {len(eligible)} a claim to another of them and "
                              f"{len(chosen)} a neutral left; check that the dump covers the qids of {paragraphs}.",
                              path=wikidata)
    manifest = {
        "kind": "argus_dataset", "version": 1,
        "inputs": {"wikidata": str(wikidata), "format": dump_format(wikidata), "paragraphs": str(paragraphs)},
        "settings": {"targets": targets, "candidates": candidates, "seed": seed,
                     "neutral_rule": "no edge to the target or any of its 1-hop neighbours"},
        "counts": {"paragraphs": len(texts), "entities": len(entities), "edges_kept": graph.edges,
                   "targets_eligible": len(eligible), "targets": len(chosen), "pairs": len(rows),
                   "candidates": sum(len(r["candidates"]) for r in rows),
                   "candidates_min": min((len(r["candidates"]) for r in rows), default=0)},
        "dropped": {**dropped, "targets_without_related_entity": len(entities) - len(eligible),
                    "targets_without_neutral": sum(not pools[x] for x in eligible)},
    }
    validate_analysis("argus_dataset", manifest, FILES["manifest"])
    _write(Path(out), [(q, graph.labels[q], texts[q]) for q in entities], {x: related[x] for x in chosen}, rows,
           manifest)
    return manifest


def _write(out: Path, entities: list[tuple[str, str, str]], related: dict[str, list[str]], rows: list[dict],
           manifest: dict) -> None:
    out = output_folder(out)
    write_jsonl(({"qid": q, "label": lab, "paragraph": p} for q, lab, p in entities), out / FILES["entities"])
    write_jsonl(({"qid": x, "related": ts} for x, ts in related.items()), out / FILES["relations"])
    write_jsonl(rows, out / FILES["candidates"])
    write_json(out / FILES["manifest"], manifest)
