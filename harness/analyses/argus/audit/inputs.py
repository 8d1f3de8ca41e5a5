"""ARGUS audit inputs: entities (a Wikipedia first paragraph and a label each), the relations between them, and the
slice vendored with gapbench (:func:`load_shipped`); the accepted file forms are described in :mod:`.retrievability`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ....errors import ConfigError, DataFormatError
from ....formats import read_jsonl


def data_dir() -> Path:
    """The vendored ARGUS slice, found through the installed package: a wheel has no ``tasks/`` beside ``gapbench/``."""
    return Path(str(resources.files("gapbench.tasks") / "data" / "argus"))



@dataclass(frozen=True)
class Entity:
    qid: str
    label: str | None
    paragraph: str


@dataclass(frozen=True)
class AuditData:
    """Entities (ordered), the audited targets and their related entities (queries), and the neighbour sets."""

    entities: Mapping[str, Entity]
    related: Mapping[str, tuple[str, ...]]  # target qid -> related qids (queries), in file order
    neighbours: Mapping[str, frozenset[str]]  # qid -> 1-hop neighbours (undirected)
    source: str = "user"
    dropped: Mapping[str, int] = field(default_factory=dict)
    # stored neutral candidates per (target, query), e.g. from ``gapbench argus dataset build``; a pair without an
    # entry samples its neutrals from the query's eligible pool (the default)
    candidates: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    # the usable edges (source, target) in file order, from which ``with_relations`` reads the other view
    edges: tuple[tuple[str, str], ...] = ()

    def with_relations(self, relations: str) -> AuditData:
        """The same entities and edges read ``directed`` (the edges' sources are audited) or ``undirected`` (every
        entity with an edge, edges read both ways), as loading the files with that mode gives; the source, the drop
        counts and the stored candidates are kept."""
        if not self.edges:
            shape = "undirected" if all(x in self.related.get(t, ()) for x, ts in self.related.items() for t in ts) \
                else "directed"
            if relations == shape:
                return self
            raise ConfigError(f"this audit data records no edges, so its {relations} view cannot be read; load it "
                              f"with relations={relations!r} (load_jsonl, load_shipped, load_dataset or build_data).")
        view = build_data(self.entities, self.edges, relations=relations, source=self.source)
        return replace(view, dropped=self.dropped, candidates=self.candidates)

    @property
    def targets(self) -> list[str]:
        return list(self.related)

    @property
    def n_pairs(self) -> int:
        return sum(len(v) for v in self.related.values())


def read_entities(path: Path) -> dict[str, Entity]:
    out: dict[str, Entity] = {}
    for i, obj in read_jsonl(path):
        qid = obj.get("qid")
        text = obj.get("paragraph", obj.get("text"))
        if not isinstance(qid, str) or not qid:
            raise DataFormatError('missing "qid" (a non-empty string); expected {"qid", "label", "paragraph"}.',
                                  path=path, line=i)
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(f'entity {qid!r} has no "paragraph" text; expected {{"qid", "label", "paragraph"}}.',
                                  path=path, line=i)
        label = obj.get("label")
        if label is not None and not isinstance(label, str):
            raise DataFormatError(f'entity {qid!r}: "label" must be a string or null.', path=path, line=i)
        if qid in out:
            raise DataFormatError(f"entity {qid!r} appears twice; qids must be unique.", path=path, line=i)
        out[qid] = Entity(qid, (label or "").strip() or None, text.strip())
    if not out:
        raise DataFormatError("no entities found.", path=path)
    return out


def read_relations(path: Path) -> list[tuple[str, str]]:
    """Edges ``(source, target)`` in file order, from any of the three accepted line forms."""
    edges: list[tuple[str, str]] = []
    accepted = ('{"source": QID, "target": QID}, {"qid": QID, "related": [QID, ...]} or '
                '{"qid": QID, "related_tags": [{"qid": QID}, ...]}')
    for i, obj in read_jsonl(path):
        if "source" in obj and "target" in obj:
            src, tgts = obj["source"], [obj["target"]]
        elif "qid" in obj and ("related" in obj or "related_tags" in obj):
            src = obj["qid"]
            raw = obj.get("related", obj.get("related_tags"))
            if not isinstance(raw, list):
                raise DataFormatError(f"the related list must be a JSON list; accepted lines: {accepted}.",
                                      path=path, line=i)
            tgts = [r.get("qid") if isinstance(r, dict) else r for r in raw]
        else:
            raise DataFormatError(f"unrecognised relation record (keys {sorted(obj)}); accepted lines: {accepted}.",
                                  path=path, line=i)
        if not isinstance(src, str) or not all(isinstance(t, str) and t for t in tgts):
            raise DataFormatError(f"qids must be non-empty strings; accepted lines: {accepted}.", path=path, line=i)
        edges.extend((src, t) for t in tgts)
    if not edges:
        raise DataFormatError(f"no relations found; accepted lines: {accepted}.", path=path)
    return edges


def build_data(entities: Mapping[str, Entity], edges: Sequence[tuple[str, str]], *, relations: str = "directed",
               source: str = "user", relations_path: Path | None = None) -> AuditData:
    """Targets, their queries and neighbour sets from edges; edges to unknown entities and self-loops are dropped
    (``relations_path``: the file the edges came from, named if none is left)."""
    if relations not in ("directed", "undirected"):
        raise ConfigError(f"relations must be 'directed' or 'undirected', got {relations!r}.")
    kept: dict[tuple[str, str], None] = {}
    dropped = 0
    for s, t in edges:
        if s in entities and t in entities and s != t:
            kept.setdefault((s, t), None)
        else:
            dropped += 1
    neighbours: dict[str, set[str]] = {}
    related: dict[str, dict[str, None]] = {}
    for s, t in kept:
        neighbours.setdefault(s, set()).add(t)
        neighbours.setdefault(t, set()).add(s)
        related.setdefault(s, {})[t] = None
        if relations == "undirected":
            related.setdefault(t, {})[s] = None
    if not related:
        unknown = next((q for e in edges for q in e if q not in entities), None)
        found = f"{unknown!r} is not in the entities ({source})" if unknown else "every edge links an entity to itself"
        raise DataFormatError(f"no usable relation: {found}; give edges between two different qids of the entities "
                              "file.", path=relations_path)
    sources = {s for s, _ in edges}
    return AuditData(
        entities=dict(entities),
        related={k: tuple(v) for k, v in related.items()},
        neighbours={k: frozenset(v) for k, v in neighbours.items()},
        source=source,
        dropped={"relations_unknown_entity": dropped,
                 "targets_without_relations": len({s for s in sources if s not in related})},
        edges=tuple(kept),
    )


def load_jsonl(entities_path: str | Path, relations_path: str | Path, *, relations: str = "directed") -> AuditData:
    ents = read_entities(Path(entities_path))
    edges = read_relations(Path(relations_path))
    return build_data(ents, edges, relations=relations, source=str(entities_path), relations_path=Path(relations_path))


def load_shipped(*, relations: str = "directed", directory: str | Path | None = None) -> AuditData:
    """The vendored slice: 620 Wikipedia first paragraphs (entities), 103 targets with 695 relations.

    Labels come from the relation file (targets and related tags); a related tag whose label is its qid (Wikidata had
    no English label) and the 25 paragraphs that appear only as neutrals have no label.
    """
    d = Path(directory) if directory else data_dir()
    kb_path = d / "kb_wikipedia_first_paragraphs.jsonl"
    rel_path = d / "entity_relations_with_contriever_ranks.jsonl"
    labels: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    for i, obj in read_jsonl(rel_path):
        labels.setdefault(obj["qid"], obj["label"])
        for tag in obj["related_tags"]:
            if tag.get("label") and tag["label"] != tag["qid"]:
                labels.setdefault(tag["qid"], tag["label"])
            edges.append((obj["qid"], tag["qid"]))
    ents: dict[str, Entity] = {}
    for i, obj in read_jsonl(kb_path):
        q = obj["qid"]
        ents[q] = Entity(q, labels.get(q), obj["text"].strip())
    return build_data(ents, edges, relations=relations, source="argus/shipped-slice")


def shipped_contriever_ranks(directory: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The authors' Contriever ranks per target: ``{qid: {"label", "ranks", "sample_sizes", "related"}}``."""
    d = Path(directory) if directory else data_dir()
    out = {}
    for _, obj in read_jsonl(d / "entity_relations_with_contriever_ranks.jsonl"):
        out[obj["qid"]] = {
            "label": obj["label"], "ranks": list(obj["rank_among_unrelevant_tags_800"]),
            "sample_sizes": list(obj["rank_among_unrelevant_tags_800_sample_size"]),
            "related": [t["qid"] for t in obj["related_tags"]],
        }
    return out
