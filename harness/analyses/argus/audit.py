"""ARGUS entity retrievability audit: the Retrieval Probability Score (RPS).

ARGUS (Taghavi et al., "With Argus Eyes", sections 3.1-3.2 and appendix B) audits a dense retriever entity by entity.
Each entity ``u`` is represented by its Wikipedia first paragraph ``w_u`` and the span of its label inside it. For a
target entity ``x`` and each related entity ``t`` (a 1-hop Wikidata neighbour, used as the query), ``x`` is ranked by
cosine similarity to ``t`` among ``N - 1`` neutral entities sampled (seeded) from the entities with no 1-hop edge to
``t``::

    Hit_k(x, t) = 1[rank(x | t) <= k]          RPS_k(x) = mean over t in T_x of Hit_k(x, t)

Ranks are optimistic for ties, as in the authors' code: ``rank = 1 + #neutrals with a strictly higher similarity``.
gapbench counts a hit when ``rank <= k`` (the paper's definition); the authors' analysis code counts ``rank < k``.
:func:`rps_from_ranks` computes both (``rule="paper"`` or ``"authors"``); they differ only where a rank equals ``k``.

Encoding (appendix B.4). One procedure serves queries, targets and neutrals:

- ``pooling="span"`` (token-level encoders, the default for sentence-transformers models): the full paragraph is encoded
  and the token vectors that overlap the character span of the label's first occurrence (case-insensitive, whitespace
  normalised) are averaged, then L2-normalised. Character spans become token spans through the HF tokenizer's offset
  mapping; token vectors come from ``model.encode(output_value="token_embeddings")``. A label that does not occur in
  the paragraph, or occurs only past the encoder's maximum length, is prepended (``label + "\\n" + paragraph``), as the
  paper grounds entities. An entity with no label is mean-pooled over all its tokens.
- ``pooling="sentence"``: the retriever's own paragraph vector (``Dense.embed``); labels are ignored.
- ``random``: seeded Gaussian vectors per paragraph, a control whose mean RPS must equal chance (about ``k / N``).

Neutral pools: for query ``t`` the pool is every entity except ``t``, the target ``x`` and the known 1-hop neighbours
of ``t`` (edges taken as undirected). The paper uses ``N = 800``; when fewer than ``N - 1`` neutrals exist (the shipped
slice has 620 paragraphs) every neutral is used, and the effective ``N`` per query and the chance level
(mean ``min(k, N_eff) / N_eff``) are reported. Sampling draws from a generator seeded by (seed, x, t), so results do not
depend on order or batching.

Input data
----------
``load_shipped()`` reads the slice vendored in ``gapbench/tasks/data/argus`` (620 Wikipedia first paragraphs,
103 targets, 695 relations). ``load_jsonl(entities, relations)`` reads a user's export:

- entities JSONL, one per line: ``{"qid": "Q1", "label": "universe", "paragraph": "The universe is ..."}``
  (``label`` may be null; ``text`` is accepted for ``paragraph``);
- relations JSONL, one edge per line ``{"source": "Q1", "target": "Q2"}`` (source = the audited target ``x``,
  target = the related entity ``t`` used as the query), or one target per line
  ``{"qid": "Q1", "related": ["Q2", ...]}`` or ``{"qid": "Q1", "related_tags": [{"qid": "Q2"}, ...]}``.
  Relations to entities absent from the entities file are dropped and counted.

``relations="undirected"`` audits every entity with at least one edge (edges read both ways), which turns the
103-target slice into 595 labelled entities; ``"directed"`` (default) audits only the sources.

Output (``write_audit(result, out)``)
-------------------------------------
``argus_audit.json``::

    {"kind": "argus_audit", "task": SOURCE, "version": 1,
     "retriever": SPEC, "encoder": {"name", "pooling", "fingerprint", "dim"},
     "k": 50, "n_requested": 800, "n_effective": {"min", "median", "mean", "max"}, "chance": 0.082,
     "seed": 0, "hit_rule": "rank <= k", "relations": "directed",
     "n_entities": 620, "n_targets": 103, "n_pairs": 695,
     "dropped": {"relations_unknown_entity": 0, "targets_without_relations": 0},
     "grounding": {"label_found": ..., "label_prepended": ..., "no_label": ...},
     "mean_rps": ..., "frac_rps_gt_0_5": ..., "terciles": {"cutoffs": [q1, q2], "counts": {"low", "mid", "high"}},
     "bands": {"low": n, "mid": n, "high": n},          # fixed bands [0,.33) [.33,.66) [.66,1]
     "warnings": [...],
     "entities": [{"qid", "label", "rps", "hits", "n_queries", "tercile", "ranks": [...], "n_candidates": [...]}]}

plus ``argus_audit.md`` (summary), ``argus_lda.png`` (2-D LDA of entity embeddings coloured by RPS tercile) and
``argus_embeddings.npz`` (``qids``, ``embeddings``, ``fingerprint``: the probe reads it).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ...errors import ConfigError, DataFormatError, GapbenchError
from ...files import atomic_writer, output_folder, write_figure, write_text_atomic
from ...formats import read_jsonl
from ...spans import embeds_texts, model_text, normalise, span_fingerprint, span_vectors, token_model
from ...tables import Table

DEFAULT_K = 50
DEFAULT_N = 800
KIND = "argus_audit"
BANDS = (("low", 0.0, 0.33), ("mid", 0.33, 0.66), ("high", 0.66, 1.0 + 1e-12))


def data_dir() -> Path:
    """The vendored ARGUS slice, found through the installed package: a wheel has no ``tasks/`` beside ``gapbench/``."""
    return Path(resources.files("gapbench.tasks").joinpath("data", "argus"))


# ---------------------------------------------------------------- data
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
            raise DataFormatError('missing "qid" (a non-empty string); expected {"qid", "label", "paragraph"}.', path=path, line=i)
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(f'entity {qid!r} has no "paragraph" text; expected {{"qid", "label", "paragraph"}}.', path=path, line=i)
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
                raise DataFormatError(f"the related list must be a JSON list; accepted lines: {accepted}.", path=path, line=i)
            tgts = [r.get("qid") if isinstance(r, dict) else r for r in raw]
        else:
            raise DataFormatError(f"unrecognised relation record (keys {sorted(obj)}); accepted lines: {accepted}.", path=path, line=i)
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
        raise ConfigError(f"the relation mode (--relation-mode) must be 'directed' or 'undirected', got {relations!r}.")
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
    )


def load_jsonl(entities_path: str | Path, relations_path: str | Path, *, relations: str = "directed") -> AuditData:
    ents = read_entities(Path(entities_path))
    edges = read_relations(Path(relations_path))
    return build_data(ents, edges, relations=relations, source=str(entities_path), relations_path=relations_path)


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


# ---------------------------------------------------------------- RPS from ranks
def rps_from_ranks(ranks: Sequence[int], k: int = DEFAULT_K, rule: str = "paper") -> float:
    """Mean hit rate: ``rank <= k`` (``rule="paper"``, gapbench's) or ``rank < k`` (``"authors"``, their code)."""
    if rule not in ("paper", "authors"):
        raise ConfigError(f"rule must be 'paper' (rank <= k) or 'authors' (rank < k), got {rule!r}.")
    if len(ranks) == 0:
        raise GapbenchError("an entity needs at least one related entity (rank) for RPS to be defined.")
    r = np.asarray(ranks)
    hits = r <= k if rule == "paper" else r < k
    return float(hits.mean())


def chance_level(sizes: Mapping[str, Sequence[int]], k: int) -> float:
    """The mean RPS_k of a random ranking over these pools (``sizes``: each target's pool sizes N_eff, one per related
    pair): a target's chance is the mean of min(k, N)/N over its pairs, averaged over targets as RPS is, so a control
    with no signal lands on it even when targets have different numbers of pairs."""
    return float(np.mean([np.mean([min(k, n) / n for n in ns]) for ns in sizes.values()]))


def terciles(scores: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Quantile terciles (0 low, 1 mid, 2 high) as the authors' LDA plots bin them; returns labels and the cut-offs."""
    s = np.asarray(scores, dtype=float)
    qs = np.quantile(s, [1 / 3, 2 / 3])
    return np.digitize(s, qs, right=False).astype(int), [float(q) for q in qs]


def band_of(scores: np.ndarray) -> np.ndarray:
    """Fixed RPS bands (section 4.2): 0 low [0, .33), 1 mid [.33, .66), 2 high [.66, 1]."""
    s = np.asarray(scores, dtype=float)
    return np.digitize(s, [0.33, 0.66], right=False).astype(int)


# ---------------------------------------------------------------- encoders
_WS = re.compile(r"\s+")


def find_mention(text: str, label: str | None) -> tuple[int, int] | None:
    """Character span of the first case-insensitive, whitespace-normalised occurrence of ``label`` in ``text``."""
    if not label:
        return None
    parts = [re.escape(p) for p in label.split()]
    if not parts:
        return None
    m = re.search(r"\s+".join(parts), text, flags=re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def _seed_from(*parts: Any) -> int:
    h = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


class RandomEncoder:
    """Seeded Gaussian unit vectors, one per text: ranks are uniform, so mean RPS must equal chance."""

    name = "random"
    pooling = "none"

    def __init__(self, dim: int = 64, seed: int = 0) -> None:
        if dim < 2:
            raise ConfigError("random: dim must be at least 2.")
        self.dim = dim
        self.seed = seed

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"argus-random:{self.dim}:{self.seed}".encode()).hexdigest()

    def encode_entities(self, entities: Sequence[Entity]) -> tuple[np.ndarray, dict[str, int]]:
        out = np.empty((len(entities), self.dim), dtype=np.float32)
        for i, e in enumerate(entities):
            v = np.random.default_rng(_seed_from(self.seed, e.paragraph)).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out, {"label_found": 0, "label_prepended": 0, "no_label": 0}


class SentenceEncoder:
    """The retriever's own paragraph vector (``embed(texts)``, cached by the adapter); labels are ignored."""

    pooling = "sentence"

    def __init__(self, retriever: Any, spec: str = "") -> None:
        self.retriever = retriever
        self.name = spec or getattr(retriever, "name", type(retriever).__name__)

    @property
    def fingerprint(self) -> str:
        from ...retrieval import fingerprint_of

        return hashlib.sha256(f"argus-sentence:v1:{fingerprint_of(self.retriever)}".encode()).hexdigest()

    def encode_entities(self, entities: Sequence[Entity]) -> tuple[np.ndarray, dict[str, int]]:
        emb = np.asarray(self.retriever.embed([e.paragraph for e in entities]), dtype=np.float32)
        return normalise(emb), {"label_found": 0, "label_prepended": 0, "no_label": 0}


class SpanEncoder:
    """Mention-span mean pooling over a sentence-transformers model's token embeddings (appendix B.4).

    Works with gapbench's ``Dense`` adapter (any sentence-transformers model). Results are cached in the embedding
    cache (kind ``argus``) keyed by this encoder's fingerprint and the (span, text) pairs.
    """

    pooling = "span"

    def __init__(self, dense: Any, spec: str = "dense", batch_size: int = 32, block: int = 256) -> None:
        self.block = block
        self.dense = dense
        self.name = spec
        self.batch_size = batch_size

    @property
    def fingerprint(self) -> str:
        return span_fingerprint(self.dense.fingerprint)

    def _model(self):
        model = token_model(self.dense)
        if model is None:
            raise ConfigError(f"argus: {self.name!r} gives no sentence-transformers token model, so span pooling is "
                              "impossible; use pooling=sentence.")
        return model

    def ground(self, entities: Sequence[Entity]) -> tuple[list[str], list[tuple[int, int] | None], dict[str, int]]:
        """Texts and character spans to pool; prepends labels that are missing or truncated away."""
        model = self._model()
        tok = model.tokenizer
        max_len = model.max_seq_length
        texts, spans = [], []
        stats = {"label_found": 0, "label_prepended": 0, "no_label": 0}
        for e in entities:
            text = model_text(model, e.paragraph)[0]
            label = model_text(model, e.label)[0] if e.label else None
            if not label:
                texts.append(text)
                spans.append(None)
                stats["no_label"] += 1
                continue
            span = find_mention(text, label)
            if span is not None:
                offs = tok(text, return_offsets_mapping=True, truncation=True, max_length=max_len)["offset_mapping"]
                if not any(b > a and a < span[1] and b > span[0] for a, b in offs):
                    span = None
            if span is None:
                text = label + "\n" + text
                span = (0, len(label))
                stats["label_prepended"] += 1
            else:
                stats["label_found"] += 1
            texts.append(text)
            spans.append(span)
        return texts, spans, stats

    def _encode_keys(self, keys: list[str]) -> np.ndarray:
        spans, texts = [], []
        for key in keys:
            a, b, text = key.split("\t", 2)
            spans.append(None if a == "-" else (int(a), int(b)))
            texts.append(text)
        return self.encode_spans(texts, spans)

    def encode_spans(self, texts: Sequence[str], spans: Sequence[tuple[int, int] | None]) -> np.ndarray:
        """Span-pooled, L2-normalised vectors, one span per text; ``None`` spans pool every (non-special) token."""
        return span_vectors(self._model(), texts, [[s] for s in spans], batch_size=self.batch_size, block=self.block)[0]

    def encode_entities(self, entities: Sequence[Entity]) -> tuple[np.ndarray, dict[str, int]]:
        from ...cache import EmbeddingCache

        texts, spans, stats = self.ground(entities)
        keys = [("-\t-\t" if s is None else f"{s[0]}\t{s[1]}\t") + t for t, s in zip(texts, spans)]
        if getattr(self.dense, "cache", True):
            emb = EmbeddingCache(self.fingerprint, keys, chunk_size=1024, kind="argus").get(self._encode_keys)
        else:
            emb = self._encode_keys(keys)
        return emb, stats


def get_encoder(retriever: Any = "dense", pooling: str = "auto") -> Any:
    """An entity encoder for a retriever spec (``dense``, ``dense:model=NAME``, ``random``, ``random:dim=64,seed=1``)
    or object. ``pooling``: ``auto`` (span when token embeddings are available, else sentence), ``span``, ``sentence``.
    """
    if pooling not in ("auto", "span", "sentence"):
        raise ConfigError(f"pooling must be auto, span or sentence, got {pooling!r}.")
    if isinstance(retriever, str) and retriever.split(":", 1)[0].strip() == "random":
        from ...options import parse_spec

        _, opts = parse_spec(retriever)
        unknown = set(opts) - {"dim", "seed"}
        if unknown:
            raise ConfigError(f"random: unknown option(s) {sorted(unknown)}; accepted: dim, seed.")
        return RandomEncoder(dim=int(opts.get("dim", 64)), seed=int(opts.get("seed", 0)))
    if hasattr(retriever, "encode_entities") and hasattr(retriever, "fingerprint"):
        return retriever  # already an entity encoder
    from ...retrieval import get_retriever

    spec = retriever if isinstance(retriever, str) else getattr(retriever, "name", type(retriever).__name__)
    obj = get_retriever(retriever)
    token_level = callable(getattr(obj, "token_model", None))  # a TokenEncoder (gapbench.retrieval)
    if pooling == "span" and not token_level:
        raise ConfigError(f"argus: {spec!r} gives no token embeddings, so span pooling is impossible; use pooling=sentence.")
    if token_level and pooling in ("auto", "span"):
        return SpanEncoder(obj, spec=spec)
    if not embeds_texts(obj):
        raise ConfigError(f"argus: {spec!r} has no embed(texts) method giving one vector per text; the audit needs a "
                          "dense retriever such as dense or dense:model=NAME (or random for a chance control).")
    return SentenceEncoder(obj, spec=spec)


# ---------------------------------------------------------------- the audit
@dataclass
class AuditResult:
    data: AuditData
    qids: list[str]  # order of rows in ``embeddings``
    embeddings: np.ndarray
    ranks: dict[str, list[int]]
    n_candidates: dict[str, list[int]]
    k: int
    n_requested: int
    seed: int
    retriever: str
    encoder: dict
    grounding: dict
    warnings: list[str]
    relations: str = "directed"

    def rps(self, rule: str = "paper") -> dict[str, float]:
        return {q: rps_from_ranks(r, self.k, rule) for q, r in self.ranks.items()}

    def chance(self) -> float:
        return chance_level(self.n_candidates, self.k)

    def target_embeddings(self) -> tuple[list[str], np.ndarray]:
        idx = {q: i for i, q in enumerate(self.qids)}
        targets = list(self.ranks)
        return targets, self.embeddings[[idx[q] for q in targets]]

    def to_dict(self) -> dict:
        rps = self.rps()
        targets = list(self.ranks)
        scores = np.array([rps[q] for q in targets])
        terc, cuts = terciles(scores)
        bands = band_of(scores)
        all_n = np.array([n for ns in self.n_candidates.values() for n in ns])
        names = ("low", "mid", "high")
        ents = self.data.entities
        return {
            "kind": KIND, "task": self.data.source, "version": 1,
            "retriever": self.retriever, "encoder": self.encoder,
            "k": self.k, "n_requested": self.n_requested,
            "n_effective": {"min": int(all_n.min()), "median": float(np.median(all_n)), "mean": float(all_n.mean()),
                            "max": int(all_n.max())},
            "chance": self.chance(), "seed": self.seed, "hit_rule": "rank <= k",
            "relations": self.relations,
            "n_entities": len(ents), "n_targets": len(targets), "n_pairs": int(all_n.size),
            "dropped": dict(self.data.dropped), "grounding": self.grounding,
            "mean_rps": float(scores.mean()), "frac_rps_gt_0_5": float((scores > 0.5).mean()),
            "terciles": {"cutoffs": cuts, "counts": {n: int((terc == i).sum()) for i, n in enumerate(names)}},
            "bands": {n: int((bands == i).sum()) for i, n in enumerate(names)},
            "warnings": list(self.warnings),
            "entities": [
                {"qid": q, "label": ents[q].label, "rps": rps[q], "hits": int(sum(r <= self.k for r in self.ranks[q])),
                 "n_queries": len(self.ranks[q]), "tercile": names[int(t)], "ranks": self.ranks[q],
                 "n_candidates": self.n_candidates[q]}
                for q, t in zip(targets, terc)
            ],
        }


def draw_neutrals(pool_size: int, size: int, seed: int, x: str, t: str) -> np.ndarray:
    """Positions of the ``size`` neutrals drawn, without replacement, from a pool of ``pool_size`` for the pair
    (target ``x``, query ``t``): seeded by ``(seed, x, t)``, so a draw depends on neither order nor batching. The audit
    and the stored candidates of ``argus dataset build`` draw with it."""
    return np.random.default_rng(_seed_from(seed, x, t)).choice(pool_size, size=size, replace=False)


def compute_ranks(emb: np.ndarray, index: Mapping[str, int], data: AuditData, n: int, seed: int,
                  query_batch: int = 256) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Rank of each target among ``n - 1`` sampled neutrals, for every (target, query) pair.

    A pair with stored candidates (``data.candidates``) draws from those instead of the query's eligible set, with the
    same seeded sampling when more than ``n - 1`` are stored. Similarities of a batch of queries against every entity come from one matrix product; each pair then draws its
    neutrals (seeded by ``(seed, x, t)``) from the query's eligible set and counts the neutrals that beat the target.
    """
    n_ent = emb.shape[0]
    pairs = [(x, t) for x, ts in data.related.items() for t in ts]
    queries = list(dict.fromkeys(t for _, t in pairs))
    by_query: dict[str, list[str]] = {}
    for x, t in pairs:
        by_query.setdefault(t, []).append(x)
    ranks: dict[str, dict[str, int]] = {x: {} for x in data.related}
    sizes: dict[str, dict[str, int]] = {x: {} for x in data.related}
    for lo in range(0, len(queries), query_batch):
        qb = queries[lo:lo + query_batch]
        sims = emb[[index[t] for t in qb]] @ emb.T  # (batch, n_entities)
        for row, t in zip(sims, qb):
            eligible = np.ones(n_ent, dtype=bool)
            eligible[index[t]] = False
            for nb in data.neighbours.get(t, ()):
                eligible[index[nb]] = False
            for x in by_query[t]:
                stored = data.candidates.get((x, t))
                if stored is not None:
                    pool = np.array([index[z] for z in stored], dtype=np.intp)
                else:
                    mask = eligible.copy()
                    mask[index[x]] = False
                    pool = np.flatnonzero(mask)
                if pool.size == 0:
                    raise GapbenchError(f"argus: query {t!r} has no neutral entity (every entity is linked to it).")
                if pool.size > n - 1:
                    pool = pool[draw_neutrals(pool.size, n - 1, seed, x, t)]
                ranks[x][t] = int(np.count_nonzero(row[pool] > row[index[x]]) + 1)
                sizes[x][t] = int(pool.size + 1)
    return ({x: [ranks[x][t] for t in data.related[x]] for x in data.related},
            {x: [sizes[x][t] for t in data.related[x]] for x in data.related})


@dataclass(frozen=True)
class EncodedEntities:
    """Every entity of an audit's data embedded once by a retriever's encoder (what the audit and the sweep rank)."""

    retriever: str  # the spec as given, or the encoder's name
    encoder: dict  # name, pooling, fingerprint, dim, retriever_fingerprint
    qids: list[str]  # order of rows in ``embeddings``
    embeddings: np.ndarray
    index: dict[str, int]
    grounding: dict


def embed_entities(data: AuditData, retriever: Any, pooling: str = "auto") -> EncodedEntities:
    encoder = get_encoder(retriever, pooling)
    qids = list(data.entities)
    emb, grounding = encoder.encode_entities([data.entities[q] for q in qids])
    spec = retriever if isinstance(retriever, str) else getattr(encoder, "name", type(retriever).__name__)
    info = {"name": str(getattr(encoder, "name", spec)), "pooling": encoder.pooling,
            "fingerprint": encoder.fingerprint, "dim": int(emb.shape[1]),
            "retriever_fingerprint": _base_fingerprint(encoder)}
    return EncodedEntities(str(spec), info, qids, emb, {q: i for i, q in enumerate(qids)}, grounding)


def check_budget(k: int, n: int) -> None:
    """Refuse a top-k budget below 1 or a candidate-set size below 2 (``--k`` and ``--n`` of argus audit and probe)."""
    if k < 1:
        raise ConfigError(f"--k must be at least 1 (a hit is rank <= k), got {k}.")
    if n < 2:
        raise ConfigError(f"--n (candidates per query: the target and N-1 neutrals) must be at least 2, got {n}.")


def audit(data: AuditData | None = None, retriever: Any = "dense", *, k: int = DEFAULT_K, n: int = DEFAULT_N,
          seed: int = 0, pooling: str = "auto") -> AuditResult:
    """Compute RPS_k for every target of ``data`` (default: the shipped slice) with ``retriever``'s encoder.

    >>> result = audit(load_shipped(), "dense", k=50, n=800)  # doctest: +SKIP
    >>> result.to_dict()["mean_rps"]                            # doctest: +SKIP
    """
    check_budget(k, n)
    data = data if data is not None else load_shipped()
    enc = embed_entities(data, retriever, pooling)
    ranks, sizes = compute_ranks(enc.embeddings, enc.index, data, n, seed)
    warnings = []
    all_n = [s for ss in sizes.values() for s in ss]
    if min(all_n) < n:
        warnings.append(f"only {min(all_n)}-{max(all_n)} candidates per query exist (N={n} requested): the effective N "
                        f"is capped by the entities available.")
    if n < DEFAULT_N or min(all_n) < DEFAULT_N:
        warnings.append(f"pools smaller than the paper's N=800: a random ranking hits with probability k/N "
                        f"(chance level {chance_level(sizes, k):.3f} here), so RPS near that value means no "
                        "retrievability signal.")
    if k >= min(all_n):
        warnings.append(f"k={k} is at least the smallest pool ({min(all_n)}): some queries are always hits.")
    result = AuditResult(
        data=data, qids=enc.qids, embeddings=enc.embeddings, ranks=ranks, n_candidates=sizes, k=k, n_requested=n,
        seed=seed, retriever=enc.retriever, encoder=enc.encoder, grounding=enc.grounding, warnings=warnings,
        relations="undirected" if _is_undirected(data) else "directed",
    )
    return result


# ---------------------------------------------------------------- exact RPS of corpus mentions
def hit_probability(beaten: int, neutrals: int, n: int = DEFAULT_N, k: int = DEFAULT_K) -> float:
    """P(rank <= k) of a target that ``beaten`` of ``neutrals`` eligible neutrals outscore, when ``n - 1`` of them are
    drawn without replacement (all of them when fewer exist), ties optimistic as in :func:`compute_ranks`.

    The expectation over the paper's random neutral draws (a hypergeometric CDF), so no seed enters::

        hit_probability(2, 3, n=3, k=2)   # 2 of 3 drawn; a miss only when both beaters are drawn: 1 - 1/3
    """
    if k < 1 or n < 2:
        raise ConfigError(f"k={k}, n={n}: give k >= 1 and n >= 2.")
    draws = min(n - 1, neutrals)
    if draws == neutrals:
        return float(beaten <= k - 1)
    from scipy.stats import hypergeom

    return float(hypergeom.cdf(k - 1, neutrals, beaten, draws))


def mention_rps(retriever: Any, corpus: Any, holders: Mapping[str, frozenset[str]],
                queries: Mapping[str, Sequence[str]], *, k: int = DEFAULT_K, n: int = DEFAULT_N,
                batch: int = 256) -> dict[tuple[str, str], float]:
    """Exact RPS_k of entities mentioned in a corpus, measured with the retriever's own scores.

    ``holders``: entity key -> the documents that mention it (the targets); ``queries``: entity key -> query texts
    (the entity's related context). For each query the retriever scores the whole corpus once; a document's hit
    probability among ``n - 1`` neutrals drawn from the documents that do not mention the entity is
    :func:`hit_probability`; RPS is its mean over the entity's queries. Returns ``(key, doc_id) -> RPS`` for the keys
    with queries. The retriever is indexed on ``corpus`` here (it ranks the whole corpus).
    """
    from ...retrieval import search_with
    from ...types import Queries, Query

    ids = corpus.ids()
    pos = {d: i for i, d in enumerate(ids)}
    texts = list(dict.fromkeys(t for key in queries if key in holders for t in queries[key]))
    retriever.index(corpus)
    scores: dict[str, np.ndarray] = {}
    for lo in range(0, len(texts), batch):  # a full-depth run of every query at once would hold |Q| x |D| pairs
        chunk = texts[lo:lo + batch]
        run = search_with(retriever, Queries(Query(f"a{lo + i}", t) for i, t in enumerate(chunk)), len(ids), None)
        for i, t in enumerate(chunk):
            row = np.full(len(ids), -np.inf)  # an unranked document ties with every other unranked one
            for did, sc in run.get(f"a{lo + i}", ()):
                row[pos[did]] = sc
            scores[t] = row
    out: dict[tuple[str, str], float] = {}
    for key, docs in holders.items():
        if not queries.get(key):
            continue
        eligible = np.ones(len(ids), dtype=bool)
        eligible[[pos[d] for d in docs]] = False
        n_neutral = int(eligible.sum())
        for did in docs:
            hits = [hit_probability(int(np.count_nonzero(scores[t][eligible] > scores[t][pos[did]])), n_neutral, n, k)
                    for t in queries[key]]
            out[(key, did)] = float(np.mean(hits))
    return out


def _base_fingerprint(encoder: Any) -> str:
    from ...retrieval import fingerprint_of

    inner = getattr(encoder, "dense", None) or getattr(encoder, "retriever", None)
    return fingerprint_of(inner) if inner is not None else encoder.fingerprint


def _is_undirected(data: AuditData) -> bool:
    return all(x in data.related.get(t, ()) for x, ts in data.related.items() for t in ts)


# ---------------------------------------------------------------- outputs
def write_json(path: Path, obj: dict) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


def lda_projection(emb: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, tuple[str, str]]:
    """2-D projection: LDA on tercile labels; with one discriminant axis the second is the residual's first PC."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    classes = np.unique(labels)
    n_comp = min(2, emb.shape[1], len(classes) - 1)
    if n_comp < 1:
        centred = emb - emb.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        return centred @ vt[:2].T, ("PC 1", "PC 2")
    lda = LinearDiscriminantAnalysis(n_components=n_comp, solver="svd")
    z = lda.fit(emb, labels).transform(emb)
    if n_comp == 2:
        return z[:, :2], ("LD 1", "LD 2")
    w = lda.scalings_[:, 0] / np.linalg.norm(lda.scalings_[:, 0])
    res = emb - (emb @ w)[:, None] * w[None, :]
    res = res - res.mean(axis=0)
    _, _, vt = np.linalg.svd(res, full_matrices=False)
    return np.column_stack([z[:, 0], res @ vt[0]]), ("LD 1", "residual PC 1")


def plot_lda(result: AuditResult, path: Path) -> None:
    from ...files import pyplot

    plt = pyplot()
    targets, emb = result.target_embeddings()
    rps = result.rps()
    scores = np.array([rps[q] for q in targets])
    terc, cuts = terciles(scores)
    z, (xl, yl) = lda_projection(emb, terc)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    colours = {0: "#d62728", 1: "#7f7f7f", 2: "#1f77b4"}
    names = {0: f"low (RPS < {cuts[0]:.2f})", 1: "mid", 2: f"high (RPS >= {cuts[1]:.2f})"}
    for c in (0, 1, 2):
        sel = terc == c
        if sel.any():
            ax.scatter(z[sel, 0], z[sel, 1], s=16, alpha=0.75, c=colours[c], label=f"{names[c]} n={int(sel.sum())}")
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"ARGUS audit: LDA of entity embeddings by RPS tercile\n{result.retriever}, "
                 f"k={result.k}, N={result.n_requested}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path, dpi=120)


def summary_table(d: Mapping[str, Any]) -> Table:
    """The audit's headline numbers, one measure a row."""
    cuts, bands = d["terciles"]["cutoffs"], d["bands"]
    rows = [["targets / queries (pairs)", f"{d['n_targets']} / {d['n_pairs']}"],
            ["mean RPS", f"{d['mean_rps']:.4f}"],
            ["chance (mean k/N_eff)", f"{d['chance']:.4f}"],
            ["fraction RPS > 0.5", f"{d['frac_rps_gt_0_5']:.4f}"],
            ["tercile cut-offs", f"{cuts[0]:.3f}, {cuts[1]:.3f}"],
            ["bands low/mid/high", f"{bands['low']} / {bands['mid']} / {bands['high']}"]]
    return Table(["measure", "value"], rows, align="ll")


def blind_spot_table(d: Mapping[str, Any], n: int = 10) -> Table:
    """The ``n`` entities with the lowest RPS (ties by qid)."""
    rows = [[e["qid"], e["label"] or "", f"{e['rps']:.3f}", f"{e['hits']}/{e['n_queries']}"]
            for e in sorted(d["entities"], key=lambda e: (e["rps"], e["qid"]))[:n]]
    return Table(["qid", "label", "RPS", "hits/queries"], rows, align="llll")


def audit_markdown(d: dict) -> str:
    ne = d["n_effective"]
    lines = [
        f"# ARGUS retrievability audit: {d['task']}",
        "",
        f"Retriever `{d['retriever']}` ({d['encoder']['pooling']} pooling, dim {d['encoder']['dim']}), "
        f"k={d['k']}, N={d['n_requested']} requested (effective {ne['min']}-{ne['max']}, median {ne['median']:g}), "
        f"seed {d['seed']}, hit = {d['hit_rule']}, relations {d['relations']}.",
        "",
        summary_table(d).markdown(),
        "",
    ]
    lines += [f"> warning: {w}" for w in d["warnings"]] + ([""] if d["warnings"] else [])
    lines += ["Lowest-RPS entities (blind spots):", "", blind_spot_table(d).markdown(), ""]
    return "\n".join(lines)


def write_audit(result: AuditResult, out: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """Write argus_audit.json/.md, argus_lda.png and argus_embeddings.npz into ``out``; returns their paths."""
    out = output_folder(out)
    d = result.to_dict()
    paths = {"json": out / "argus_audit.json", "md": out / "argus_audit.md", "embeddings": out / "argus_embeddings.npz"}
    write_json(paths["json"], d)
    write_text_atomic(paths["md"], audit_markdown(d))
    with atomic_writer(paths["embeddings"], binary=True) as fh:
        np.savez(fh, qids=np.array(result.qids), embeddings=result.embeddings,
                 fingerprint=np.array(result.encoder["fingerprint"]))
    if plot:
        paths["lda"] = out / "argus_lda.png"
        plot_lda(result, paths["lda"])
    return paths
