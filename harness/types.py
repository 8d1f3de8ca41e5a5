"""Core record and collection types.

Ids are strings everywhere. Collections are immutable ordered mappings; every constructor validates its input and
returns a new object. Ties in a ranking are broken in exactly one place, :func:`rank_key`: score descending, then
doc_id descending, which is the order trec_eval (and so pytrec_eval) uses.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from .errors import DataFormatError, DuplicateIdError, GapbenchError, UnknownIdError


@dataclass(frozen=True, slots=True)
class Document:
    doc_id: str
    text: str
    title: str = ""

    @property
    def full_text(self) -> str:
        """Title and text joined, the form most retrievers index."""
        return f"{self.title} {self.text}" if self.title else self.text


@dataclass(frozen=True, slots=True)
class Query:
    query_id: str
    text: str
    instruction: str = ""


MAX_ID_LENGTH = 1024
# The widest grade range trec_eval documents; pytrec_eval allocates one counter per grade up to the largest, so a
# grade of 2**31 alone costs minutes and gigabytes.
MAX_GRADE = 127


def id_problem(value: object) -> str | None:
    """Why ``value`` cannot be an id, or None when it can.

    An id is a non-empty string of at most :data:`MAX_ID_LENGTH` printable characters without spaces: TREC files
    separate their columns by whitespace and their records by newlines, so any other id could not be written to a
    run file and read back as itself.
    """
    if not isinstance(value, str):
        kind = type(value).__name__
        return f"is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a string"
    if not value:
        return "is empty"
    if len(value) > MAX_ID_LENGTH:
        return f"is {len(value)} characters long; ids have at most {MAX_ID_LENGTH}"
    if value.isprintable() and " " not in value:
        return None
    bad = next(c for c in value if c == " " or not c.isprintable())
    return (f"contains {describe_char(bad)}; ids cannot hold whitespace, control or invisible characters "
            "(they would break TREC files)")


def describe_char(char: str) -> str:
    """``U+00A0 (NO-BREAK SPACE)``: a character that cannot be seen, named so that it can be found."""
    name = unicodedata.name(char, "") or {"\t": "TAB", "\n": "LINE FEED", "\r": "CARRIAGE RETURN"}.get(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else "")


def show_id(value: object) -> str:
    """``repr`` of an id, cut short so that an over-long id cannot flood an error message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:60] + "..." + text[-10:]


def _check_id(value: object, what: str, source: str | None = None) -> str:
    problem = id_problem(value)
    if problem is not None or not isinstance(value, str):
        raise DataFormatError(f"{what} {show_id(value)} {problem}; give a valid id.", path=source)
    return value


def grade_problem(value: object) -> str | None:
    """Why ``value`` cannot be a relevance grade, or None when it can (an int within +-:data:`MAX_GRADE`)."""
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, float) and value.is_integer()):
        return "is not an integer grade"
    if not -MAX_GRADE <= value <= MAX_GRADE:
        return f"is outside the grades trec_eval accepts (-{MAX_GRADE} to {MAX_GRADE})"
    return None


R = TypeVar("R", bound="Document | Query")


class _Records(Mapping[str, R], Generic[R]):
    """Ordered, immutable id -> record mapping with a content fingerprint."""

    _kind = "record"
    _id_attr = "id"

    def __init__(self, records: Iterable[R], *, source: str | None = None) -> None:
        recs = list(records)
        ids: list[str] = list(map(attrgetter(self._id_attr), recs))
        # checked at C speed; one by one only to name the culprit
        data: dict[str, R] = dict(zip(ids, recs)) if ids_clean(ids) else {}
        if len(data) != len(recs):
            data = {}
            for rid, rec in zip(ids, recs):
                _check_id(rid, f"{self._kind} id", source)
                if rid in data:
                    where = f" in {source}" if source else ""
                    raise DuplicateIdError(
                        f"duplicate {self._kind} id {rid!r}{where}; every {self._kind} id must be unique.")
                data[rid] = rec
        self._data: dict[str, R] = data
        self._fingerprint: str | None = None

    def __getitem__(self, key: str) -> R:
        try:
            return self._data[key]
        except KeyError:
            raise self._unknown(key) from None

    def _unknown(self, key: object) -> UnknownIdError:
        return UnknownIdError(f"unknown {self._kind} id {key!r} ({len(self)} {self._kind}s known).")

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def ids(self) -> list[str]:
        return list(self._data)

    def _fields(self, rec: R) -> Sequence[str]:
        raise NotImplementedError

    @property
    def fingerprint(self) -> str:
        """sha256 over ids and texts, in order: the key of every cache built on this collection."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            for rid, rec in self._data.items():
                for part in (rid, *self._fields(rec)):
                    b = part.encode("utf-8")
                    h.update(len(b).to_bytes(8, "little"))
                    h.update(b)
            self._fingerprint = h.hexdigest()
        return self._fingerprint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} {self._kind}s, fingerprint={self.fingerprint[:12]})"


class Corpus(_Records["Document"]):
    """doc_id -> Document, in corpus order."""

    _kind = "document"
    _id_attr = "doc_id"

    def _fields(self, rec: Document) -> Sequence[str]:
        return (rec.title, rec.text)

    # -- streamed access: what retrievers index from, so that no adapter needs every Document object at once
    def doc_ids(self) -> list[str]:
        """Document ids in corpus order (position i is the document that ``texts_at([i])`` returns)."""
        return list(self._data)

    def iter_texts(self, *, use_title: bool = True, batch_size: int = 8192) -> Iterator[list[str]]:
        """Texts in corpus order, ``batch_size`` at a time: ``full_text`` (title and text) or, without titles,
        ``text``."""
        batch: list[str] = []
        for doc in self._data.values():
            batch.append(doc.full_text if use_title else doc.text)
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def texts_at(self, positions: Iterable[int], *, use_title: bool = True) -> list[str]:
        """Texts of the documents at the given corpus positions, in the order given."""
        if not hasattr(self, "_docs"):
            self._docs = list(self._data.values())
        docs = self._docs
        return [docs[i].full_text if use_title else docs[i].text for i in positions]

    def ids_at(self, positions: Iterable[int]) -> list[str]:
        """Document ids at the given corpus positions, in the order given."""
        ids = self._id_list()
        return [ids[i] for i in positions]

    def position(self, doc_id: str) -> int:
        """Corpus position of ``doc_id`` (UnknownIdError, as ``corpus[doc_id]``, when it is not in the corpus)."""
        if not hasattr(self, "_positions"):
            self._positions = {did: i for i, did in enumerate(self._data)}
        try:
            return self._positions[doc_id]
        except (KeyError, TypeError):
            raise self._unknown(doc_id) from None

    def missing(self, doc_ids: Iterable[str]) -> list[str]:
        """The ids that are not in the corpus, in the order given (one pass, for checking runs and qrels)."""
        data = self._data
        return [d for d in doc_ids if d not in data]

    def tie_keys(self) -> Any:
        """int64 key per corpus position, the rank of its id in sorted order: a larger key wins a score tie."""
        from .topk import tie_keys

        return tie_keys(self._id_list())

    def _id_list(self) -> list[str]:
        # built once: adapters call ids_at per query batch
        if not hasattr(self, "_ids"):
            self._ids = list(self._data)
        return self._ids

    @classmethod
    def from_dict(cls, data: Mapping[str, str | Mapping[str, str]]) -> Corpus:
        """``{"d1": "text"}`` or ``{"d1": {"text": ..., "title": ...}}``."""
        docs = []
        for did, val in data.items():
            if isinstance(val, str):
                docs.append(Document(did, val))
            else:
                docs.append(Document(did, val.get("text", ""), val.get("title", "") or ""))
        return cls(docs)


class Queries(_Records["Query"]):
    """query_id -> Query, in query order."""

    _kind = "query"
    _id_attr = "query_id"

    def _fields(self, rec: Query) -> Sequence[str]:
        return (rec.instruction, rec.text)

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> Queries:
        return cls(Query(qid, text) for qid, text in data.items())

    def with_instruction(self, instruction: str) -> Queries:
        return Queries(Query(q.query_id, q.text, instruction) for q in self.values())


class Qrels(Mapping[str, Mapping[str, int]]):
    """query_id -> doc_id -> graded relevance (int). Negative and zero grades are kept: they are judgements."""

    def __init__(self, data: Mapping[str, Mapping[str, int]], *, source: str | None = None) -> None:
        clean: dict[str, dict[str, int]] = {}
        for qid, docs in data.items():
            qid = _check_id(qid, "query id", source)
            if isinstance(docs, dict) and ids_clean(docs) and _grades_clean(docs.values()):
                clean[qid] = dict(docs)
                continue
            row: dict[str, int] = {}
            for did, rel in docs.items():
                did = _check_id(did, "doc id", source)
                problem = grade_problem(rel)
                if problem is not None:
                    raise DataFormatError(
                        f"relevance of ({qid!r}, {did!r}) is {rel!r}, which {problem}.", path=source
                    )
                row[did] = int(rel)
            clean[qid] = row
        self._data = clean  # private plain dicts (pytrec_eval needs dicts); readers get read-only views
        self.source = source

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, int]]) -> Qrels:
        return cls(data)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {q: dict(d) for q, d in self._data.items()}

    def __getitem__(self, key: str) -> Mapping[str, int]:
        return MappingProxyType(self._data[key])

    def judgements(self, query_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        """Plain dicts for the given queries, shared with this object: for evaluation backends, never to be mutated."""
        return {q: self._data[q] for q in query_ids}

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def positive_queries(self, min_rel: int = 1) -> list[str]:
        """Queries with at least one judgement >= min_rel (the ones that are evaluated)."""
        return [q for q, d in self._data.items() if any(r >= min_rel for r in d.values())]

    def restrict(self, query_ids: Iterable[str]) -> Qrels:
        keep = set(query_ids)
        return Qrels({q: d for q, d in self._data.items() if q in keep})

    def check_against(self, corpus: Corpus, queries: Queries | None = None) -> None:
        missing = set(corpus.missing(did for docs in self._data.values() for did in docs))
        for qid, docs in self._data.items():
            if queries is not None and qid not in queries:
                raise UnknownIdError(f"qrels name query {qid!r}, which is not in the query set.")
            for did in docs:
                if did in missing:
                    raise UnknownIdError(f"qrels of query {qid!r} name document {did!r}, which is not in the corpus.")

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for qid in sorted(self._data):
            for did in sorted(self._data[qid]):
                h.update(f"{qid}\t{did}\t{self._data[qid][did]}\n".encode())
        return h.hexdigest()

    def __repr__(self) -> str:
        n = sum(len(d) for d in self._data.values())
        return f"Qrels({len(self)} queries, {n} judgements)"


def rank_key(item: tuple[str, float]) -> tuple[float, str]:
    """Sort key for (doc_id, score) giving score descending, then doc_id descending (with reverse=True)."""
    return (item[1], item[0])


def sort_ranking(items: Iterable[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(items, key=rank_key, reverse=True))


_RANK_KEY = itemgetter(1, 0)


def ids_clean(ids: Iterable[str]) -> bool:
    """True when every id passes :func:`id_problem`, checked at C speed; False means "check one by one"."""
    try:
        joined = "".join(ids)
    except TypeError:
        return False
    if not joined.isprintable() or " " in joined:
        return False
    return not ids or (min(map(len, ids)) > 0 and max(map(len, ids)) <= MAX_ID_LENGTH)


def _grades_clean(grades: Iterable[int]) -> bool:
    return set(map(type, grades)) == {int} and -MAX_GRADE <= min(grades) and max(grades) <= MAX_GRADE


def clean_scores(ranking: Mapping[str, Any]) -> Mapping[str, float] | None:
    """``ranking`` with float scores when its ids and scores are all valid, else None (take the checking path)."""
    if not ranking:
        return ranking
    if not ids_clean(ranking):
        return None
    values = ranking.values()
    try:
        if not math.isfinite(sum(values)):  # NaN and inf propagate through the sum
            return None
    except TypeError:
        return None
    if set(map(type, values)) == {float}:
        return ranking
    return {d: float(v) for d, v in ranking.items()}


def _fast_ranking(ranking: Mapping[str, Any]) -> tuple[tuple[str, float], ...] | None:
    clean = clean_scores(ranking)
    if clean is None:
        return None
    return tuple(sorted(clean.items(), key=_RANK_KEY, reverse=True))


def _score(value: Any, did: str, qid: str, source: str | None) -> float:
    """A score as a float: a number (an int, a float, a numpy scalar) or its decimal text; anything else (a word,
    None, a list) is a DataFormatError naming the document and the query."""
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    raise DataFormatError(f"score of document {did!r} for query {qid!r} is {value!r:.60}, not a number; give each "
                          "score as a finite number (a run is query id -> doc id -> score).", path=source)


class Run(Mapping[str, tuple[tuple[str, float], ...]]):
    """query_id -> ranked tuple of (doc_id, score), sorted by :func:`rank_key`.

    Scores must be finite. ``name`` labels the system in tables.
    """

    __slots__ = ("_data", "name")

    def __init__(
        self,
        data: Mapping[str, Mapping[str, float] | Iterable[tuple[str, float]]],
        name: str = "run",
        *,
        source: str | None = None,
        _sorted: bool = False,
    ) -> None:
        out: dict[str, tuple[tuple[str, float], ...]] = {}
        for qid, ranking in data.items():
            if not _sorted:
                _check_id(qid, "query id", source)
            items = ranking.items() if isinstance(ranking, Mapping) else ranking
            if _sorted:
                out[qid] = tuple(items)
                continue
            if isinstance(ranking, Mapping):
                fast = _fast_ranking(ranking)
                if fast is not None:
                    out[qid] = fast
                    continue
            seen: set[str] = set()
            pairs = []
            for did, score in items:
                _check_id(did, "doc id", source)
                if did in seen:
                    raise DuplicateIdError(
                        f"document {did!r} is ranked twice for query {qid!r}; a run lists each document once per "
                        "query.",
                        path=source,
                    )
                seen.add(did)
                score = _score(score, did, qid, source)
                if not math.isfinite(score):
                    raise DataFormatError(
                        f"score of document {did!r} for query {qid!r} is {score}; scores must be finite numbers "
                        "(check the retriever for NaN or infinite similarities).",
                        path=source,
                    )
                pairs.append((did, score))
            out[qid] = sort_ranking(pairs)
        self._data = out
        self.name = name

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float]], name: str = "run") -> Run:
        return cls(data, name)

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {q: dict(r) for q, r in self._data.items()}

    def __getitem__(self, key: str) -> tuple[tuple[str, float], ...]:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def top(self, k: int) -> Run:
        return Run({q: r[:k] for q, r in self._data.items()}, self.name, _sorted=True)

    def renamed(self, name: str) -> Run:
        return Run(self._data, name, _sorted=True)

    def check_against(self, corpus: Corpus, source: str | None = None) -> None:
        # the distinct ids first, at C speed: a run of 1.5M lines names a few thousand documents
        missing = set(corpus.missing(set(map(itemgetter(0), chain.from_iterable(self._data.values())))))
        if not missing:
            return
        for qid, ranking in self._data.items():
            for did, _ in ranking:
                if did in missing:
                    where = f"{source}: " if source else ""
                    raise UnknownIdError(
                        f"{where}run ranks document {did!r} for query {qid!r}, but the corpus has no such document; "
                        "check that the run was made on this task's corpus."
                    )

    def __repr__(self) -> str:
        return f"Run({self.name!r}, {len(self)} queries)"


class OtherRowsExcluded(Mapping[str, frozenset[str]]):
    """A multiple-choice task's exclusions: query id -> the candidates of every other row, built when asked for, so
    memory stays linear in the corpus."""

    def __init__(self, own: Mapping[str, tuple[str, ...]], all_ids: frozenset[str]) -> None:
        self._own = own
        self._all = all_ids

    def __getitem__(self, qid: str) -> frozenset[str]:
        return self._all.difference(self._own[qid])

    def __iter__(self) -> Iterator[str]:
        return iter(self._own)

    def __len__(self) -> int:
        return len(self._own)

    def own(self, qid: str) -> tuple[str, ...]:
        """The doc ids a query may rank: its row's candidates, in candidate order."""
        return self._own[qid]

    allowed = own  # read by gapbench.topk.exclusion_indices: mask everything but these, without the complement


@dataclass(frozen=True)
class TaskData:
    """What a task's ``load()`` returns. ``excluded`` maps a query id to doc ids never to be ranked for it;
    ``unjudged`` counts the queries of the task's files a loader left out because the qrels judge none of their
    documents (BEIR's DBpedia: 50 queries, 40 judged), so that results say so (:attr:`RunResults.n_unjudged`)."""

    corpus: Corpus
    queries: Queries
    qrels: Qrels
    excluded: Mapping[str, frozenset[str]] = field(default_factory=dict)
    unjudged: int = 0

    def validate(self, name: str = "task") -> None:
        if not len(self.corpus):
            raise GapbenchError(f"{name}: the corpus is empty.")
        if not len(self.queries):
            raise GapbenchError(f"{name}: the query set is empty.")
        for q in self.queries.values():
            if not q.text.strip():
                raise DataFormatError(f"{name}: query {q.query_id!r} has empty text; remove it or give its text.")
        self.qrels.check_against(self.corpus, self.queries)
