"""The retriever protocol, the retriever registry, and wrapping of users' own retriever objects."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .errors import ConfigError, GapbenchError
from .registry import Registry, provides
from .settings import build
from .specs import check_one_line, parse_spec, quote
from .types import Corpus, Queries, Run

# ``gapbench run --augment SPEC``: the name before ":" picks the entry, a function
# ``f(spec, retriever, corpus, *, llm_base_url, llm_model) -> (augmented retriever, manifest dict)``. The augmenters
# live above the core (ARGUS' argus-expand and argus-synth): an analysis declares them in its plugin registration
# (gapbench.plugins), so the run reaches them by name, never through an import.
RUN_AUGMENTERS: Registry[Any] = Registry(
    "augmenter", hint="ARGUS augments with argus-expand:... or argus-synth:....", expects=callable,
    expected="a function f(spec, retriever, corpus, *, llm_base_url, llm_model) -> (retriever, manifest)",
)


def _augmenters_of_the_analyses() -> None:
    from .plugins import usable_analyses

    for analysis in usable_analyses()[0].values():
        for name, target in analysis.augmenters:
            if not RUN_AUGMENTERS.has(name):
                RUN_AUGMENTERS.register(name, target)


RUN_AUGMENTERS.add_loader(_augmenters_of_the_analyses)

SECRET_WORDS = ("key", "token", "secret", "password")


@runtime_checkable
class Retriever(Protocol):
    """Indexes a corpus, then ranks it for queries.

    ``search`` returns a :class:`Run` (or a dict query_id -> {doc_id: score}) of at most ``k`` results per query, with
    each query's ``exclude`` ids masked before the top-k cut. Optional members, read where present: ``fingerprint``
    (str: what identifies the rankings, keys every cache), ``config()`` (a JSON-ready dict for the manifest),
    ``llm_manifest()`` (see :class:`Reranker`) and ``query_scores(queries)`` (after ``index``: each query's score for
    every indexed document in corpus order, one array at a time, so an analysis can rank any subset without a search).
    """

    name: str

    def index(self, corpus: Corpus) -> None: ...

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run: ...


@runtime_checkable
class Reranker(Protocol):
    """Reorders a run: ``rerank(queries, run, corpus)`` returns a new :class:`Run` over (a prefix of) each query's
    ranking, best first; ``run`` is not changed.

    Optional members, read where present: ``name``; ``config()`` (JSON-ready dict for the manifest); ``answers``
    (how an LLM's answers were read: clean, repaired, re-asked, fallback); ``llm_manifest()`` (an LLM-backed
    component's model, endpoint, sampling and usage, or None before its first call); ``rerank_pools(queries, pools,
    corpus, seed=None)`` (rank given candidate pools, used by ``gapbench gap``); ``seeds`` and ``llm_calls``.
    """

    def rerank(self, queries: Queries, run: Run, corpus: Corpus) -> Run: ...


@runtime_checkable
class Augmenter(Protocol):
    """Makes extra views of documents: ``augment(corpus)`` returns a new list of views, each with ``view_id`` (never a
    corpus id), ``source_id`` (the corpus document it stands for) and ``text``; ``corpus`` is not changed. Retrieval
    indexes the views beside the originals and collapses them onto their sources
    (:class:`gapbench.analyses.argus.remedy.views.Augmented`). ``name`` names the augmenter in the manifest."""

    name: str

    def augment(self, corpus: Corpus) -> list[Any]: ...


@runtime_checkable
class Encoder(Protocol):
    """Text to vectors: ``encode_texts(texts)`` returns a float32 array (len(texts), dim), rows in the given order.

    ``fingerprint`` identifies the vector space (a probe trained on one space refuses another).
    """

    fingerprint: str

    def encode_texts(self, texts: list[str]) -> Any: ...


@runtime_checkable
class TokenEncoder(Encoder, Protocol):
    """An :class:`Encoder` whose token vectors can be pooled over character spans (ARGUS' span pooling).

    ``token_model()`` is the loaded sentence-transformers model behind the vectors: its ``tokenizer`` (fast, with
    offsets), ``max_seq_length`` and ``encode(texts, output_value="token_embeddings")`` are what
    :func:`gapbench.spans.span_vectors` reads. ``doc_prompt`` and ``use_title`` say how a document becomes the text
    that is encoded.
    """

    doc_prompt: str
    use_title: bool

    def token_model(self) -> Any: ...


# typed by the protocols above; entries are usually classes built with the user's options, or factory functions
RETRIEVERS: Registry[Any] = Registry(
    "retriever", hint="Pass options as NAME:key=value,...; a sentence-transformers model works as dense:model=NAME.",
    expects=provides(Retriever, factories=True),
    expected="a retriever (a class or object with index(corpus) and search(queries, k), or a function making one)",
)

RERANKERS: Registry[Any] = Registry(
    "reranker", hint="Pass options as NAME:key=value,...; the LLM endpoint comes from --llm-base-url and --llm-model.",
    expects=provides(Reranker, factories=True),
    expected="a reranker (a class or object with rerank(queries, run, corpus), or a function making one)",
)


def llm_manifest_of(component: Any) -> dict[str, Any] | None:
    """What an LLM-backed component reports about its model and calls (``llm_manifest()``), or None."""
    report = getattr(component, "llm_manifest", None)
    manifest: dict[str, Any] | None = report() if callable(report) else None
    return manifest


def with_task_defaults(spec: str | Any, defaults: Mapping[str, Mapping[str, Any]]) -> tuple[str | Any, dict[str, Any]]:
    """``spec`` with the task's defaults for that reranker added where it leaves them out, and the ones added.

    >>> with_task_defaults("tournament:batch_size=3", {"tournament": {"batch_size": 6, "promote": 2}})
    ('tournament:promote=2,batch_size=3', {'promote': 2})
    """
    if not isinstance(spec, str):
        return spec, {}
    name, options = parse_spec(spec, "reranker")
    applied = {k: v for k, v in defaults.get(name, {}).items() if k not in options}
    if not applied:
        return spec, {}
    rest = spec.strip().partition(":")[2]
    # the defaults go first: a user's value holding commas (seeds=0,1,2) stays whole at the end
    return f"{name}:" + ",".join([f"{k}={quote(v)}" for k, v in applied.items()] + ([rest] if rest else [])), applied


def register_retriever(name: str, obj: Any = None, *, replace: bool = False) -> Any:
    """Register a retriever class (decorator) or a lazy ``"module:attr"`` entry.

    >>> @register_retriever("my-bm25")  # doctest: +SKIP
    ... class MyBM25: ...
    """
    return RETRIEVERS.register(name, obj, replace=replace)


def public_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config with secret-looking values removed, safe for logs and manifests."""
    return {k: ("***" if any(w in k.lower() for w in SECRET_WORDS) else v) for k, v in config.items()}


def payload_fingerprint(payload: Mapping[str, Any]) -> str:
    """sha256 (hex) of ``payload`` as JSON with sorted keys; a value JSON cannot hold is written as its ``str``.

    The key of caches and of committed results, so its bytes must never change (``tests/test_contract_adapters.py``
    pins one).

    >>> payload_fingerprint({"adapter": "bm25s", "k1": 1.5})[:12]
    '3ae672658d90'
    """
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def fingerprint_of(retriever: Any) -> str:
    fp = getattr(retriever, "fingerprint", None)
    if isinstance(fp, str):
        return fp
    cfg = getattr(retriever, "config", None)
    cfg = cfg() if callable(cfg) else (cfg or {})
    return payload_fingerprint({"class": type(retriever).__qualname__, "config": public_config(cfg)})


def config_of(retriever: Any) -> dict[str, Any]:
    cfg = getattr(retriever, "config", None)
    cfg = cfg() if callable(cfg) else (cfg or {})
    return public_config(dict(cfg))


def get_retriever(spec: str | Any, *, llm_base_url: str | None = None, llm_model: str | None = None) -> Any:
    """A retriever from a spec string (``bm25``, ``dense:model=NAME``), a registered class, or an object.

    ``llm_base_url`` and ``llm_model`` reach the LLM retrievers (``rewrite:bm25``, ``agent:bm25``) that take them."""
    if not isinstance(spec, str):
        if inspect.isclass(spec):
            spec = spec()
        _check_protocol(spec)
        return spec
    check_one_line(spec, "retriever spec")
    if not spec.strip():
        raise ConfigError("empty retriever name; for example bm25 or dense:model=NAME.")
    _ensure_builtin()
    head, _, rest = spec.partition(":")
    if not head.strip():
        parse_spec(spec)  # raises: a spec with no name before ':'
    cls = RETRIEVERS.get(head.strip())
    if getattr(cls, "takes_spec", False):
        # composite retrievers (fusion) read the rest of the spec themselves, e.g. "rrf:bm25+dense:model=NAME"
        llm = {"llm_base_url": llm_base_url, "llm_model": llm_model} if getattr(cls, "takes_llm", False) else {}
        obj = cls.from_spec(rest, **llm)
        _check_protocol(obj)
        return obj
    name, options = parse_spec(spec)
    obj = build(cls, options, f"retriever {name}") if inspect.isclass(cls) or callable(cls) else cls
    if not getattr(obj, "name", None) or obj.name == getattr(type(obj), "name", None) and options:
        try:
            obj.name = spec
        except AttributeError:
            pass
    _check_protocol(obj)
    return obj


def _check_protocol(obj: Any) -> None:
    missing = [m for m in ("index", "search") if not callable(getattr(obj, m, None))]
    if missing:
        raise ConfigError(
            f"{type(obj).__name__} is not a retriever: it lacks {' and '.join(missing)}(). A retriever has "
            "index(corpus) and search(queries, k) returning a Run or a dict query_id -> {doc_id: score}."
        )


def search_with(retriever: Any, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None) -> Run:
    """Call ``retriever.search`` and normalise its output to a :class:`Run` of at most k results per query.

    A retriever that does not take ``exclude`` is asked for k plus the largest exclusion list, and exclusions are then
    removed, so each query still gets k results.
    """
    params = inspect.signature(retriever.search).parameters
    takes_exclude = "exclude" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
    name = getattr(retriever, "name", None) or type(retriever).__name__
    if takes_exclude or not exclude:
        out = retriever.search(queries, k, exclude=exclude) if takes_exclude else retriever.search(queries, k)
    else:
        extra = max((len(v) for v in exclude.values()), default=0)
        out = retriever.search(queries, k + extra)
    run = out if isinstance(out, Run) else Run(out, name=name)
    if run.name != name:
        run = run.renamed(name)
    unknown = [q for q in run if q not in queries]
    if unknown:
        raise GapbenchError(f"retriever {name!r} returned results for query {unknown[0]!r}, which was not asked.")
    if exclude:
        data = {q: [p for p in r if p[0] not in exclude.get(q, ())][:k] for q, r in run.items()}
        run = Run(data, name, _sorted=True)
    return run.top(k)


def doc_positions(doc_ids: Sequence[str]) -> tuple[Any, dict[str, int]]:
    """(tie keys, doc id -> position) of documents held in corpus order: what a retriever that reads the corpus
    whole ranks ties and masks exclusions by."""
    from .topk import tie_keys

    return tie_keys(doc_ids), {d: i for i, d in enumerate(doc_ids)}


def rank_each(name: str, qids: Sequence[str], analysed: Iterable[Any], excluded: Iterable[Any],
              rank: Callable[[Any, Any], list[tuple[str, float]]]) -> tuple[Run, tuple[str, ...]]:
    """A retriever's search loop, with a progress bar: ``rank(tokens, exclusion)`` for each query id, its analysed
    tokens and its exclusion taken in step. A query with no token left after analysis (empty, stopwords,
    punctuation) has nothing to match: it gets an empty ranking and its id is in the second value, the retriever's
    ``empty_queries``."""
    from .progress import progress

    out: dict[str, list[tuple[str, float]]] = {}
    empty: list[str] = []
    with progress(len(qids), f"{name}: searching", unit="queries") as advance:
        for qid, toks, ex in zip(qids, analysed, excluded):
            if any(toks):
                out[qid] = rank(toks, ex)
            else:
                out[qid] = []
                empty.append(qid)
            advance(1)
    return Run(out, name, _sorted=True), tuple(empty)


def top_positions(scores: Any, exclusion: Any, k: int, keys: Any, keep_zero: bool) -> tuple[Any, Any]:
    """(positions of the k best scores in ranking order, gapbench's tie rule on ``keys``; the scores they index):
    ``exclusion`` (from :func:`gapbench.topk.exclusion_indices`) masked first, and scores of 0 or less left out
    unless ``keep_zero``. ``scores`` itself is never changed."""
    import numpy as np

    from .topk import apply_mask, select_topk

    scores = apply_mask(scores, exclusion)
    if not keep_zero:
        scores = np.where(scores > 0, scores, -np.inf)
    return select_topk(scores, k, keys), scores


# What one ranked result costs while a run is held and written: the (doc_id, score) tuple, its id and float, its line.
RESULT_BYTES = 200


def query_batch_size(k: int) -> int:
    """Queries searched at once when a run is written as it is produced: their results fill a quarter of the budget."""
    from .budget import rows_within

    return rows_within(k * RESULT_BYTES, share=0.25)


def search_in_batches(
    retriever: Any,
    queries: Queries,
    k: int,
    exclude: Mapping[str, frozenset[str]] | None,
    on_batch: Callable[[Run], None] | None = None,
) -> Run:
    """:func:`search_with` over batches of queries (in query order) sized by :func:`query_batch_size`, handing each
    batch's Run to ``on_batch`` as soon as it is produced, so a run can be written while it is searched.

    Queries that fit one batch are searched in one call, as :func:`search_with` does; each batch sees the whole
    ``exclude`` mapping, so a query gets the same results whichever batch it is in.
    """
    size = query_batch_size(k)
    ids = list(queries)
    if len(ids) <= size:
        parts = [queries]
    else:
        parts = [Queries(queries[q] for q in ids[i:i + size]) for i in range(0, len(ids), size)]
    rankings: dict[str, tuple[tuple[str, float], ...]] = {}
    name = "run"
    for part in parts:
        found = search_with(retriever, part, k, exclude)
        if on_batch is not None:
            on_batch(found)
        rankings.update(found.items())
        name = found.name
    return Run(rankings, name, _sorted=True) if len(parts) > 1 else found


def _ensure_builtin() -> None:
    # the plugin package is named, not imported statically: the core never depends on a plugin (tests/test_layers.py)
    importlib.import_module("gapbench.adapters")  # registers built-in adapters lazily (no heavy imports)


def get_reranker(spec: str | Any, *, llm_base_url: str | None = None, llm_model: str | None = None) -> Any:
    """A reranker from a spec string (``tournament:batch_size=6,promote=2``) or an object with ``rerank``.

    ``llm_base_url`` and ``llm_model`` (the CLI's ``--llm-base-url`` and ``--llm-model``) fill the LLM options that the
    spec leaves out.
    """
    if not isinstance(spec, str):
        if not callable(getattr(spec, "rerank", None)):
            raise ConfigError(f"{type(spec).__name__} is not a reranker: it lacks rerank(queries, run, corpus).")
        return spec
    _ensure_builtin()
    name, options = parse_spec(spec, "reranker")
    cls = RERANKERS.get(name)
    for key, value in (("llm_base_url", llm_base_url), ("llm_model", llm_model)):
        if value is not None:
            options.setdefault(key, value)
    return build(cls, options, f"reranker {name}")
