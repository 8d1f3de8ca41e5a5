"""Fusion of any retrievers: reciprocal rank fusion and normalised score fusion.

Specs (the retriever names are registered by gapbench; components are any retriever specs)::

    rrf:bm25+dense                          reciprocal rank fusion, k=60 (Cormack, Clarke & Buettcher, SIGIR 2009)
    fuse-minmax:bm25+dense:model=NAME       CombSUM of min-max normalised scores
    fuse-dbsf:bm25+dense                    distribution-based score fusion (Qdrant's DBSF)
    rrf:[k=20,depth=200,weights=1;2]bm25+dense     options of the fusion itself, in a leading bracket
    rrf:bm25+(fuse-minmax:bm25-lucene+dense)       a parenthesised component may itself be a fusion

Syntax: ``NAME:[OPTIONS]COMPONENT+COMPONENT+...``. Components are split on ``+`` outside brackets and parentheses,
so a component keeps its own options (``dense:model=NAME,batch_size=32``); wrap a component in ``( )`` when it contains
``+`` itself. The bracket takes ``key=value`` pairs separated by commas:

- ``depth`` (int, default 1000): each component retrieves ``max(k, depth)`` documents per query, with the same
  exclusions as the fused search; the fused list is then cut to k.
- ``weights`` (numbers separated by ``;``, one per component, default all 1): multiplies each component's contribution.
- ``k`` (rrf only, default 60): the rank constant.

Scores, per query (ranks are 1-based positions in a component's list, which is ordered by gapbench's tie rule):

- rrf: ``sum_s w_s / (k + rank_s(d))``; a document missing from a component's list contributes 0.
- fuse-minmax: ``sum_s w_s * (x - min_s) / (max_s - min_s)`` over each component's retrieved list.
- fuse-dbsf: as min-max, but with bounds ``mean_s -/+ 3 * std_s`` (sample standard deviation, n - 1), not clamped,
  as in Qdrant's ``distr_norm``.
- Both score fusions: a list with one document or with all scores equal normalises to 0.5 (Qdrant's rule); a document
  missing from a component's list gets that component's minimum normalised score, which is 0 (the bottom of the
  normalised scale), or the list's lowest normalised score when that is lower (a DBSF outlier below mean - 3 std), so a
  missing document never outranks a listed one on that component.

Fused ties are broken by gapbench's one rule (score descending, then doc_id descending).

>>> fused = RRF(["bm25", "dense"], k=60)              # doctest: +SKIP
>>> gapbench.run("impliret/multispeaker/wknow", "rrf:bm25+dense")  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from gapbench.contract import Depth, NonNegative
from gapbench.errors import ConfigError, OptionsError
from gapbench.retrieval import config_of, fingerprint_of, get_retriever, payload_fingerprint, search_with
from gapbench.settings import Settings, parse_float, unknown_option
from gapbench.specs import closing_bracket, split_options, split_pieces
from gapbench.types import Corpus, Queries, Run, sort_ranking

DEFAULT_DEPTH = 1000
DEFAULT_RRF_K = 60.0


def _weights(value: Any) -> Any:
    """``"1;2"`` (a spec's text) or a list as a tuple of numbers; the model checks each is finite and >= 0."""
    if isinstance(value, str):
        parts = [parse_float(w) for w in value.split(";")]
        if None in parts:
            raise ValueError("must be finite numbers separated by ';', one per retriever, e.g. weights=1;2")
        return tuple(parts)
    return tuple(value) if isinstance(value, list) else value


Weights = Annotated[tuple[NonNegative, ...] | None, BeforeValidator(_weights),
                    Field(json_schema_extra={"accepts": "numbers >= 0 separated by ';', one per retriever"})]
# every fusion's depth and weights, described once
FusedDepth = Annotated[Depth, Field(description="Documents of each retriever's ranking that are fused.")]
FusedWeights = Annotated[Weights, Field(description="One weight per retriever (2;1); none: 1 each.")]


class FusionSettings(Settings):
    """The settings of ``fuse-minmax`` and ``fuse-dbsf`` (``fuse-minmax:[depth=100,weights=1;2]bm25+dense``)."""

    depth: FusedDepth = DEFAULT_DEPTH
    weights: FusedWeights = None


class RRFSettings(Settings):
    """The settings of ``rrf`` (``rrf:[k=60,depth=1000]bm25+dense``)."""

    k: NonNegative = Field(DEFAULT_RRF_K, description="The RRF constant: a document scores the sum of weight / (k + "
                                                      "rank) over the rankings.")
    depth: FusedDepth = DEFAULT_DEPTH
    weights: FusedWeights = None


def _strip_parens(text: str) -> str:
    text = text.strip()
    # "(a)+(b)" starts and ends with parentheses that do not match each other, so check the match
    while text.startswith("(") and closing_bracket(text) == len(text) - 1:
        text = text[1:-1].strip()
    return text


def option_bracket(method: str, spec: str, options: Sequence[str], *, usage: str,
                   example: str | None = None) -> tuple[dict[str, str], str]:
    """``[key=value,...]REST`` at the start of ``spec`` read into ({key: value}, REST); without a bracket ({}, spec).

    Every key must be one of ``options`` and given once; ``usage`` ends the messages. With ``example`` (fusion's
    ``k=60,depth=1000``), values are plain: a bracket inside the option bracket is refused, and a piece that is not
    key=value is answered with the example; without it a value may hold brackets (an IPv6 endpoint URL)."""
    text = spec.strip()
    if not text.startswith("["):
        return {}, text
    end = closing_bracket(text)
    if end < 0:
        raise ConfigError(f"{method}: the option bracket in {spec!r} is not closed; {usage}.")
    body = text[1:end]
    if example is not None and any(ch in body for ch in "[]()"):
        raise ConfigError(f"{method}: the option bracket in {spec!r} holds another bracket; write plain key=value "
                          f"pairs, e.g. [{example}].")
    hint = usage if example is None else f"write [{example}]"
    out: dict[str, str] = {}
    for key, value in split_options(body, spec):
        if value is None or not key:
            shown = key if value is None else f"{key}={value}"
            raise ConfigError(f"{method}: option {shown!r} in {spec!r} is not key=value; {hint}.")
        if key not in options:
            raise unknown_option(f"retriever {method}", key, list(options))
        if key in out:
            raise ConfigError(f"{method}: option {key!r} is given twice in {spec!r}.")
        out[key] = value
    return out, text[end + 1:].strip()


class _Fusion:
    """Shared machinery: components, depth, weights, config and fingerprint. Subclasses define ``fuse_query``."""

    name = "fusion"
    method = "fusion"
    takes_spec = True
    takes_llm = True  # passed on to components that talk to an LLM (rrf:bm25+rewrite:bm25)
    settings: type[FusionSettings] | type[RRFSettings] = FusionSettings
    options: tuple[str, ...] = tuple(FusionSettings.model_fields)

    def __init__(self, retrievers: Sequence[Any], **options: Any):
        """``RRF(["bm25", "dense"], k=60)``: the retrievers (specs or objects) and any of :attr:`settings`, checked
        (an ``OptionsError`` names a bad one)."""
        o = self.settings.check(f"retriever {self.method}", options)
        depth, given = o.depth, o.weights
        for key in type(o).model_fields.keys() - FusionSettings.model_fields.keys():
            setattr(self, key, getattr(o, key))  # rrf's k, before the name is made
        if len(retrievers) < 2:
            raise ConfigError(
                f"{self.method} fuses at least two retrievers, got {len(retrievers)}; write for example "
                f"{self.method}:bm25+dense."
            )
        self.retrievers = [get_retriever(r) for r in retrievers]
        self.depth = depth
        weights = [1.0] * len(self.retrievers) if given is None else [float(w) for w in given]
        if len(weights) != len(self.retrievers):
            raise OptionsError(f"retriever {self.method}", [("weights", (
                f"holds {len(weights)} weights for {len(self.retrievers)} retrievers; give one weight per retriever, "
                f"e.g. weights={';'.join(['1'] * len(self.retrievers))}"))])
        self.weights: list[float] = weights
        self.name = self._make_name()

    # -- spec parsing
    @classmethod
    def from_spec(cls, rest: str, *, llm_base_url: str | None = None, llm_model: str | None = None) -> _Fusion:
        """Build from the part of a spec after ``NAME:``, e.g. ``"[k=60,depth=100]bm25+dense:model=NAME"``."""
        text = rest.strip()
        usage = f"write {cls.method}:bm25+dense or {cls.method}:[{cls._example_options()}]bm25+dense"
        if not text:
            raise ConfigError(f"{cls.method} needs the retrievers to fuse; {usage}.")
        bracket = text.startswith("[")
        raw_options, text = option_bracket(cls.method, rest, list(cls.options), usage=usage,
                                           example=cls._example_options())
        if bracket and not text:
            raise ConfigError(f"{cls.method}: no retrievers after the options in {rest!r}; {usage}.")
        parts = [_strip_parens(p) for p in split_pieces(text, "+", brackets="[]()", strict=True)]
        empty = [i + 1 for i, p in enumerate(parts) if not p]
        if empty:
            raise ConfigError(
                f"{cls.method}: retriever number {empty[0]} in {rest!r} is empty (a stray '+'); {usage}."
            )
        kwargs = cls._coerce_options(raw_options, len(parts))
        return cls([get_retriever(p, llm_base_url=llm_base_url, llm_model=llm_model) for p in parts], **kwargs)

    @classmethod
    def _example_options(cls) -> str:
        return "k=60,depth=1000,weights=1;2" if "k" in cls.options else "depth=1000,weights=1;2"

    @classmethod
    def _coerce_options(cls, raw: Mapping[str, str], n: int) -> dict[str, Any]:
        """The bracket's text read and checked by :attr:`settings`: only the options given, typed."""
        given = cls.settings.from_text(f"retriever {cls.method}", raw)
        return {key: getattr(given, key) for key in raw}

    # -- identity
    def _params(self) -> dict[str, Any]:
        return {"depth": self.depth, "weights": self.weights}

    def _make_name(self) -> str:
        names = []
        for r in self.retrievers:
            n = getattr(r, "name", None) or type(r).__name__
            names.append(f"({n})" if "+" in n else n)
        defaults = type(self)._default_params(len(self.retrievers))
        changed = [f"{k}={self._format(v)}" for k, v in self._params().items() if v != defaults.get(k)]
        bracket = f"[{','.join(changed)}]" if changed else ""
        return f"{self.method}:{bracket}{'+'.join(names)}"

    @staticmethod
    def _format(v: Any) -> str:
        if isinstance(v, list):
            return ";".join(f"{x:g}" for x in v)
        if isinstance(v, float):
            return f"{v:g}"
        return str(v)

    @classmethod
    def _default_params(cls, n: int) -> dict[str, Any]:
        return {"depth": DEFAULT_DEPTH, "weights": [1.0] * n}

    def config(self) -> dict:
        return {
            "method": self.method,
            **self._params(),
            "components": [
                {"name": getattr(r, "name", None) or type(r).__name__,
                 "class": f"{type(r).__module__}.{type(r).__qualname__}",
                 "config": config_of(r)}
                for r in self.retrievers
            ],
        }

    @property
    def fingerprint(self) -> str:
        payload = {
            "adapter": "gapbench-fusion/1",
            "method": self.method,
            **self._params(),
            "components": [fingerprint_of(r) for r in self.retrievers],
        }
        return payload_fingerprint(payload)

    # -- retriever protocol
    def index(self, corpus: Corpus) -> None:
        for r in self.retrievers:
            r.index(corpus)

    def search(self, queries: Queries, k: int, exclude: Mapping[str, frozenset[str]] | None = None) -> Run:
        if k < 1:
            raise ConfigError(f"{self.name}: k must be a positive integer, got {k}.")
        n = max(k, self.depth)
        runs = [search_with(r, queries, n, exclude) for r in self.retrievers]
        out: dict[str, tuple[tuple[str, float], ...]] = {}
        for qid in queries:
            lists = [run.get(qid, ()) for run in runs]
            fused = self.fuse_query(lists)
            banned = exclude.get(qid, ()) if exclude else ()
            items = [(d, s) for d, s in fused.items() if d not in banned]  # components already masked; a safety net
            out[qid] = sort_ranking(items)[:k]
        return Run(out, self.name, _sorted=True)

    def fuse_query(self, lists: Sequence[Sequence[tuple[str, float]]]) -> dict[str, float]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class RRF(_Fusion):
    """Reciprocal rank fusion: ``score(d) = sum_s w_s / (k + rank_s(d))`` (Cormack et al., SIGIR 2009)."""

    name = "rrf"
    method = "rrf"
    settings = RRFSettings
    options = tuple(RRFSettings.model_fields)
    k: float

    def _params(self) -> dict[str, Any]:
        return {"k": self.k, **super()._params()}

    @classmethod
    def _default_params(cls, n: int) -> dict[str, Any]:
        return {"k": DEFAULT_RRF_K, **super()._default_params(n)}

    def fuse_query(self, lists: Sequence[Sequence[tuple[str, float]]]) -> dict[str, float]:
        scores: dict[str, float] = {}
        for w, ranking in zip(self.weights, lists):
            for rank, (doc, _) in enumerate(ranking, start=1):
                scores[doc] = scores.get(doc, 0.0) + w / (self.k + rank)
        return scores


class _ScoreFusion(_Fusion):
    """CombSUM of per-query normalised scores; subclasses give the normalisation bounds."""

    def bounds(self, values: Sequence[float]) -> tuple[float, float] | None:
        raise NotImplementedError

    def normalise(self, ranking: Sequence[tuple[str, float]]) -> tuple[dict[str, float], float]:
        """Normalised scores of one list, and the value a document missing from it gets."""
        if not ranking:
            return {}, 0.0
        values = [s for _, s in ranking]
        b = self.bounds(values)
        if b is None or b[0] == b[1]:
            return {d: 0.5 for d, _ in ranking}, 0.0
        lo, hi = b
        norm = {d: (s - lo) / (hi - lo) for d, s in ranking}
        return norm, min(0.0, min(norm.values()))

    def fuse_query(self, lists: Sequence[Sequence[tuple[str, float]]]) -> dict[str, float]:
        normed = [self.normalise(r) for r in lists]
        docs: dict[str, None] = {}
        for r in lists:
            docs.update(dict.fromkeys(d for d, _ in r))
        return {
            d: sum(w * scores.get(d, missing) for w, (scores, missing) in zip(self.weights, normed)) for d in docs
        }


class MinMaxFusion(_ScoreFusion):
    """CombSUM of min-max normalised scores: ``(x - min) / (max - min)`` per component and query."""

    name = "fuse-minmax"
    method = "fuse-minmax"

    def bounds(self, values: Sequence[float]) -> tuple[float, float] | None:
        if len(values) < 2:
            return None
        return min(values), max(values)


class DBSFusion(_ScoreFusion):
    """Distribution-based score fusion: min-max with bounds mean -/+ 3 sample standard deviations (Qdrant's DBSF)."""

    name = "fuse-dbsf"
    method = "fuse-dbsf"

    def bounds(self, values: Sequence[float]) -> tuple[float, float] | None:
        n = len(values)
        if n < 2:
            return None
        mean = math.fsum(values) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
        return mean - 3.0 * std, mean + 3.0 * std


__all__ = ["RRF", "MinMaxFusion", "DBSFusion"]
