"""Evaluation through ir-measures (pytrec_eval backend) with explicit, reported semantics.

- A query that has a positive judgement but is absent from the run scores 0 on every measure (trec_eval ``-c``).
- Queries without any positive judgement are dropped; runs' queries absent from the qrels are ignored. Both counts are
  reported on the result (:class:`gapbench.schemas.RunResults`).
- Ties are broken by score descending, then doc_id descending, the same rule as :class:`~gapbench.types.Run`.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import Field

from .. import trec_names
from ..contract import unknown_setting
from ..errors import ConfigError, DataFormatError, GapbenchError, OptionsError, TrecNameError, UnknownIdError
from ..schemas.run import RunResults
from ..settings import accepts_type, fits, parse_float, parse_int
from ..specs import split_list
from ..tables import Table
from ..types import Qrels, Run, clean_scores
from .evaluate_options import EvaluateOptions
from .stats import bootstrap_cis

DEFAULT_MEASURES = ("nDCG@10", "R@100", "RR@10")
# What a measure without a cut-off (AP, Rprec, nDCG) reads by convention: trec_eval's runs hold 1,000 per query.
CONVENTIONAL_DEPTH = 1000

# A cut-off deeper than any ranking changes nothing but P@k's denominator; the bound keeps every backend's integers
# (C longs in trec_eval) exact. Leave the cut-off out to evaluate the whole ranking.
MAX_CUTOFF = 1_000_000_000
ACCEPTED_FORMS = (
    f"accepted forms: NAME, NAME@K or NAME(param=value,...)@K, K a whole number from 1 to {MAX_CUTOFF:,}, for example "
    "nDCG@10, R@100, RR@10, AP, P@10, Judged@10, P(rel=2)@5, nDCG(judged_only=true)@10, or trec_eval's names: "
    + trec_names.EXAMPLES
)
_MEASURE = re.compile(r"(?P<name>[^\W\d]\w*)(?:\((?P<params>[^()]*)\))?(?:@(?P<at>[^@()]*))?")
_MAX_MEASURE_LEN = 200
# What each ir-measures parameter may be, beyond its type (the same name means the same thing in every measure): the
# bounds of a pydantic field, worded and checked as every setting is (gapbench.settings.accepts_type, fits).
_PARAM_RANGES = {
    "cutoff": Field(ge=1, le=MAX_CUTOFF),
    "rel": Field(ge=1),  # the lowest grade counted relevant: 0 would count judged non-relevant documents
    "min_rel": Field(ge=0),
    "max_rel": Field(ge=1),
    "recall": Field(ge=0, le=1),
    "p": Field(gt=0, lt=1),
    "T": Field(gt=0),
    "alpha": Field(ge=0, le=1),
    "beta": Field(ge=0),
}
# Providers that run an external program on temporary files, and need numeric query ids (gdeval is a perl script).
_EXTERNAL_PROVIDERS = ("gdeval",)


def split_measures(text: str) -> list[str]:
    """``"nDCG@10, P(rel=2)@5 AP"`` -> ``["nDCG@10", "P(rel=2)@5", "AP"]``: commas and spaces inside brackets stay."""
    parts = split_list(text, ", \t\n\r\f\v", brackets="(){}")  # the one spec grammar: gapbench.specs
    return trec_names.join_lists(parts)  # trec_eval's -m P.5,10: P at 5 and at 10


def parse_measures(measures: str | Iterable[str] | None) -> list[Any]:
    """Measure names as ir-measures writes them (``nDCG@10``, ``R@100``, ``RR@10``, ``AP``, ``P@10``), each checked
    before any backend sees it: the name, every parameter's type and range, and that an installed backend computes it.

    ``None`` means the defaults; an explicitly empty list is an error.
    """
    if measures is None:
        measures = DEFAULT_MEASURES
    if isinstance(measures, str):
        measures = split_measures(measures)
    elif not isinstance(measures, Iterable):
        raise ConfigError(
            f"measures must be a list of names such as ['nDCG@10', 'R@100'], got {type(measures).__name__}."
        )
    measures = list(measures)
    if not measures:
        raise ConfigError("no measures given; for example measures=['nDCG@10', 'R@100'].")
    if all(isinstance(m, str) for m in measures):
        measures = trec_names.expand_sets(measures)  # trec_eval's all_trec and official (their measures)
    return [_parse_measure(m) for m in measures]


def measure_name(text: str) -> str:
    """The one name a measure is stored and looked up under: ir-measures' (``map`` -> ``AP``, ``ndcg_cut_10`` ->
    ``nDCG@10``, `` nDCG@10 `` -> ``nDCG@10``), the key results give its mean under. Store this, never the text
    given, or a later lookup by the results' key misses it. A ConfigError for a name that is not a measure."""
    return str(parse_measures([text])[0])


def _measure_error(text: str, problem: str) -> ConfigError:
    return ConfigError(f"measure {text!r}: {problem}; {ACCEPTED_FORMS}.")


def _parse_measure(item: object) -> Any:
    import ir_measures

    if isinstance(item, ir_measures.Measure):
        return _checked_measure(item, str(item), dict(item.params))
    if not isinstance(item, str):
        raise ConfigError(
            f"measure {item!r} is not text but {type(item).__name__}; give measure names as text, e.g. 'nDCG@10'."
        )
    text = item.strip()
    if not text:
        raise ConfigError(f"an empty measure name was given; {ACCEPTED_FORMS}.")
    if len(text) > _MAX_MEASURE_LEN or any(ord(ch) < 32 or ch == "\x7f" for ch in text):
        shown = text[:60] + ("..." if len(text) > 60 else "")
        raise _measure_error(
            shown, f"a measure is one short line (at most {_MAX_MEASURE_LEN} characters, no control characters)"
        )
    m = _MEASURE.fullmatch(text)
    if m is None or m.group("name") not in ir_measures.measures.registry:
        translated = _from_trec(text)
        if translated is not None:
            return translated
    if m is None:
        if text.count("@") > 1:
            raise _measure_error(text, "it has more than one '@'")
        raise _measure_error(text, "it is not written as NAME, NAME@K or NAME(param=value,...)@K")
    name = m.group("name")
    registry = ir_measures.measures.registry
    if name not in registry:
        same = [n for n in registry if n.casefold() == name.casefold()]
        close = same or difflib.get_close_matches(name, [*registry, *trec_names.NAMES], n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        forms = ACCEPTED_FORMS[0].upper() + ACCEPTED_FORMS[1:]
        raise ConfigError(f"unknown measure {text!r}: no measure is named {name!r}.{hint} {forms}.")
    base = registry[name]
    supported = base.SUPPORTED_PARAMS
    params: dict[str, Any] = {}
    if m.group("params") is not None:
        for piece in split_measures(m.group("params").replace(" ", "")):
            key, eq, raw = piece.partition("=")
            if not eq or not key:
                raise _measure_error(text, f"parameter {piece!r} is not key=value")
            if key not in supported or key == base.AT_PARAM:
                accepted = ", ".join(k for k in supported if k != base.AT_PARAM) or "none"
                raise _measure_error(text, f"{name} has no parameter {key!r} (its parameters: {accepted})")
            if key in params:
                raise _measure_error(text, f"parameter {key!r} is given twice")
            params[key] = _param_value(text, name, key, raw, supported[key].dtype)
    if m.group("at") is not None:
        at = base.AT_PARAM
        if at not in supported:
            raise _measure_error(text, f"{name} takes no cut-off; write it without '@'")
        params[at] = _param_value(text, name, at, m.group("at"), supported[at].dtype)
    return _checked_measure(base(**params), text, {**base.params, **params})


def _from_trec(text: str) -> Any:
    """The measure trec_eval names ``text`` (``map``, ``P.10``, ``ndcg_cut_10``, ``gm_map``), or None when it names
    none."""
    from . import trec_params

    try:
        own = trec_params.parse(text)
    except trec_params.ParamError as exc:
        raise _measure_error(text, str(exc)) from None
    if own is not None:
        return own
    try:
        ir_text = trec_names.from_trec(text)
    except TrecNameError as exc:
        raise _measure_error(text, str(exc)) from None
    if ir_text is None:
        return None
    try:
        return _parse_measure(ir_text)
    except ConfigError as exc:  # a cut-off out of range: name the measure as the user wrote it
        raise ConfigError(str(exc).replace(repr(ir_text), f"{text!r} (trec_eval's name for {ir_text})", 1)) from None


def _param_value(text: str, name: str, key: str, raw: str, dtype: type) -> Any:
    """One parameter value parsed by its declared type: digits for int, a finite decimal for float, true/false for
    bool, a bare or quoted word for str, ``{grade:gain,...}`` for dict. Nothing is evaluated as Python."""
    label = "cut-off" if key in ("cutoff", "recall") else key
    nouns = {int: "a whole number", float: "a finite number", bool: "true or false", dict: "{grade:gain,...}"}
    what = nouns.get(dtype, "a word")
    rng = _PARAM_RANGES.get(key)
    bounded = Annotated[dtype, rng] if rng is not None and dtype in (int, float) else None
    if bounded is not None:
        what = accepts_type(bounded)
    fail = _measure_error(text, f"{label} of {name} must be {what}, got {raw!r}")
    value = raw.strip()
    if dtype is bool:
        if value.lower() not in ("true", "false"):
            raise fail
        return value.lower() == "true"
    if dtype in (int, float):
        out = parse_int(value) if dtype is int else parse_float(value)
        if out is None or (bounded is not None and not fits(bounded, out)):
            raise fail
        return out
    if dtype is dict:
        pairs = re.fullmatch(r"\{((?:[+-]?[0-9]+:[+-]?[0-9]+,?)*)\}", value)
        if pairs is None:
            raise fail
        return {int(k): int(v) for k, v in (p.split(":") for p in pairs.group(1).split(",") if p)}
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    if not re.fullmatch(r"[\w.+-]+", value):
        raise fail
    return value


def _checked_measure(measure: Any, text: str, params: Mapping[str, Any]) -> Any:
    """``measure`` once every parameter has the declared type and range and an installed backend computes it."""
    import ir_measures
    from ir_measures.measures.base import _NOT_PROVIDED

    name = measure.__name__
    for key, info in measure.SUPPORTED_PARAMS.items():
        if key not in params:
            if info.required:
                at = "@0.5" if measure.AT_PARAM == "recall" else "@10" if "cutoff" in measure.SUPPORTED_PARAMS else ""
                example = f"{name}{at}" if key == measure.AT_PARAM else f"{name}({key}=3){at}"
                label = "a cut-off" if key == measure.AT_PARAM else f"the parameter {key} ({info.desc})"
                raise _measure_error(text, f"{name} needs {label}, for example {example}")
            continue
        value = params[key]
        ok = (
            isinstance(value, bool) if info.dtype is bool
            else isinstance(value, int) and not isinstance(value, bool) if info.dtype is int
            else isinstance(value, float) and math.isfinite(value) if info.dtype is float
            else info.dtype is None or isinstance(value, info.dtype)
        )
        rng = _PARAM_RANGES.get(key)
        if not ok or (rng is not None and info.dtype in (int, float) and not fits(Annotated[info.dtype, rng], value)):
            raise _measure_error(text, f"{key} of {name} has the wrong type or range: {value!r}")
        if info.choices is not _NOT_PROVIDED and value not in info.choices:
            choices = ", ".join(map(str, info.choices))
            raise _measure_error(text, f"{key} of {name} must be one of {choices}, got {value!r}")
    waiting = []
    for provider in ir_measures.DefaultPipeline.providers:
        try:
            if not provider.supports(measure):
                continue
        except Exception:  # a provider that cannot judge these parameters does not compute them
            continue
        if not provider.is_available():
            waiting.append(f"{provider.NAME} ({provider.install_instructions() or 'not installed'})")
            continue
        if provider.NAME in _EXTERNAL_PROVIDERS:
            instead = "choose another measure"
            if name == "nDCG":
                instead = "nDCG(gains={0:0,1:1,2:3,3:7}) gives exponential gains"
            raise _measure_error(text, f"{measure} is computed only by {provider.NAME}, an external program that "
                                       f"gapbench does not run; {instead}")
        return measure
    if waiting:
        raise _measure_error(text, f"{measure} needs an evaluator that is not installed: {'; '.join(waiting)}")
    raise _measure_error(text, f"no installed evaluator computes {measure} with these parameters")


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text table (:meth:`gapbench.tables.Table.text`): text columns left-aligned, numeric ones right-aligned."""
    return Table(list(header), [list(r) for r in rows]).text()


def _descending_ranks(n: int) -> list[float]:
    """[n, n-1, ..., 1] as floats; the last m entries rank a list of m documents."""
    return [float(i) for i in range(n, 0, -1)]


def _path_given(value: object, what: str, reader: str) -> None:
    """A file's path given where its contents are expected: name the reader that turns one into the other."""
    if isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{what} is given as the path {os.fspath(value)!r:.200}, and evaluate takes the {what} "
                          f"itself; read the file first: evaluate({reader}(path), ...) (gzip files are read as they "
                          "are).")


def _as_qrels(qrels: object) -> Qrels:
    if isinstance(qrels, Qrels):
        return qrels
    if isinstance(qrels, Mapping):
        return Qrels(qrels)
    _path_given(qrels, "qrels", "gapbench.formats.read_qrels")
    raise GapbenchError(f"qrels must be a gapbench Qrels or a dict query_id -> doc_id -> grade, got "
                        f"{type(qrels).__name__}.")


# Measures with default parameters that map one-to-one onto trec_eval measures. These are computed by pytrec_eval
# directly (the backend ir-measures itself uses for them) with the run's own scores: trec_eval orders a ranking by
# score descending, then doc_id descending, which is gapbench's rule. Every other measure goes through ir-measures
# with rank-derived scores, since some of its providers (msmarco's RR@k) break ties the other way.
_TREC_MEASURE = re.compile(r"^(nDCG|R|P|AP|RR|Success|Rprec)(?:@(\d+))?$")
_TREC_NAMES = {
    "nDCG": ("ndcg_cut", "ndcg"), "R": ("recall", None), "P": ("P", None), "AP": ("map_cut", "map"),
    "RR": (None, "recip_rank"), "Success": ("success", None), "Rprec": (None, "Rprec"),
}


def _trec_request(name: str) -> tuple[str, str] | None:
    """(pytrec_eval request, output key) for a default-parameter measure, else None."""
    m = _TREC_MEASURE.match(name)
    if not m:
        return None
    with_cut, without = _TREC_NAMES[m.group(1)]
    if m.group(2):
        return (f"{with_cut}.{m.group(2)}", f"{with_cut}_{m.group(2)}") if with_cut else None
    return (without, without) if without else None


def _run_scores(run: object) -> tuple[str, dict[str, Mapping[str, float]], Run | None]:
    """(system name, query -> doc -> score, the Run if one was built). Dicts are checked without being sorted."""
    if isinstance(run, Run):
        return run.name, {q: dict(r) for q, r in run.items()}, run
    _path_given(run, "run", "gapbench.formats.read_trec_run")
    if not isinstance(run, Mapping):
        raise GapbenchError(f"run must be a gapbench Run or a dict query_id -> doc_id -> score, got "
                            f"{type(run).__name__}.")
    scores = {}
    for qid, ranking in run.items():
        clean = clean_scores(ranking) if isinstance(qid, str) and isinstance(ranking, Mapping) else None
        if clean is None:
            built = Run(run)  # the checking path: raises a precise error, or sorts out a valid but unusual input
            return built.name, {q: dict(r) for q, r in built.items()}, built
        scores[qid] = clean
    return "run", scores, None


def evaluate(
    run: Run | Mapping[str, Mapping[str, float]],
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    measures: str | Iterable[str] | None = None,
    options: EvaluateOptions | None = None,
    *,
    task: str = "",
    **settings: Any,
) -> RunResults:
    """Evaluate a run against qrels: the means, their 95% bootstrap intervals (``n_resamples`` resamples of the
    queries with ``seed``; none with 0) and, in memory, the per-query values. ``depth``: the k the run was cut at,
    where known; a measure that reads deeper is named in the result's ``notes`` (:func:`depth_notes`). The settings
    are :class:`EvaluateOptions`' (``options``, or keywords: ``evaluate(run, qrels, seed=1)``); ``task`` labels the
    results.

    >>> evaluate({"q1": {"d1": 2.0, "d2": 1.0}}, {"q1": {"d2": 1}}, ["RR@10"]).means["RR@10"]
    0.5

    A run none of whose queries is judged (a run of another collection, or other query ids) is refused with an
    :class:`~gapbench.errors.UnknownIdError`, and an empty run dict or a score that is not a number with a
    :class:`~gapbench.errors.DataFormatError`: every mean would be a 0 that says nothing. A path given for the run or
    the qrels is a :class:`~gapbench.errors.ConfigError` naming the reader (``gapbench.formats.read_trec_run``).
    """
    unknown = [key for key in settings if key not in EvaluateOptions.model_fields]
    if unknown:  # the verb's own keywords are offered too: measure= is a typo of measures=
        accepted = ["measures", "options", "task", *EvaluateOptions.model_fields]
        raise OptionsError("gapbench.evaluate", [(unknown[0], unknown_setting(unknown[0], accepted))])
    o = EvaluateOptions.of(options, settings)  # refused now, not when a CI is first read
    n_resamples, seed, depth = o.n_resamples, o.seed, o.depth
    qrels = _as_qrels(qrels)
    parsed, names = _distinct_measures(measures)
    notes = tuple(_depth_notes(parsed, names, depth)) if depth is not None else ()
    depth = _read_depth(parsed)
    if depth is not None and isinstance(run, Run):
        run = run.top(depth)  # a Run is in trec_eval's order, so its top `depth` is what every measure reads
    system, scores, built = _run_scores(run)
    if not scores and built is None and not isinstance(run, Run):
        # a dict of no query is a mistake (the wrong variable, a filter that kept nothing); a Run read from a file
        # of a retriever that found nothing is a result, scored 0 and re-scored as one
        raise DataFormatError("the run is empty (a dict of no query): every mean would be a 0 that says nothing; give "
                              "the run the retriever produced (query_id -> doc_id -> score).")
    positive = qrels.positive_queries()
    if not positive:
        raise GapbenchError("the qrels have no positive judgement (grade >= 1); nothing can be evaluated.")
    if scores and not any(q in qrels for q in scores):
        raise UnknownIdError(
            f"none of the run's {len(scores)} queries is judged in the qrels, which judge {len(qrels)} other queries "
            f"(the run has {_examples(scores)}; the qrels {_examples(qrels)}): the run and the qrels are of "
            "different collections or name their queries differently; give the qrels of the run's task.")
    judged = qrels.judgements(positive)
    run_dict = {q: scores[q] for q in positive if scores.get(q)}
    found = _measured(parsed, names, judged, run_dict, built) if run_dict else {}
    found.update(_own_values(parsed, judged, run_dict, built))
    ordered = _per_query_complete(parsed, names, found, positive, judged, run_dict)
    return run_results(system, ordered, task=task, n_missing=len(positive) - len(run_dict),
                       n_dropped=len(qrels) - len(positive), n_unjudged=sum(1 for q in scores if q not in qrels),
                       n_resamples=n_resamples, seed=seed, notes=notes)


def run_results(system: str, per_query: Mapping[str, Mapping[str, float]], *, task: str = "", n_missing: int = 0,
                n_dropped: int = 0, n_unjudged: int = 0, n_resamples: int = 1000, seed: int = 0,
                notes: Sequence[str] = (), ci95: Mapping[str, Sequence[float]] | None = None) -> RunResults:
    """The result model of per-query values (measure -> query_id -> value, every measure over the same queries): the
    means in the order evaluation sums them, and 95% percentile-bootstrap intervals resampling the queries with
    ``seed`` unless ``ci95`` gives them (none with ``n_resamples=0``)."""
    means = {m: _trec_eval_sum(v) / len(v) for m, v in per_query.items()}
    if ci95 is None and n_resamples:
        cis = bootstrap_cis({m: list(v.values()) for m, v in per_query.items()}, n_resamples=n_resamples, seed=seed)
        ci95 = {m: (lo, hi) for m, (lo, hi) in cis.items()}
    fields: dict[str, Any] = dict(task=task, system=system, n_queries=len(next(iter(per_query.values()))),
                                  n_missing=n_missing, n_dropped=n_dropped, n_unjudged=n_unjudged, measures=means,
                                  ci95=None if ci95 is None else {m: [float(lo), float(hi)] for m, (lo, hi) in
                                                                  ci95.items()})
    if notes:  # written only when there are some, as results.json always was
        fields["notes"] = list(notes)
    return RunResults(**fields).holding(per_query=per_query)


def _trec_eval_sum(values: Mapping[str, float]) -> float:
    """The values added one by one in trec_eval's query order (sorted ids, as it sorts its qrels), so a mean on a
    rounding boundary prints the digit trec_eval prints (0.04125 summed in another order can print 0.0413)."""
    total = 0.0
    for qid in sorted(values):
        total += values[qid]
    return total


def _examples(ids: Iterable[str]) -> str:
    """``'q1', 'q2', ...``: the first query ids, sorted, for a message."""
    first = sorted(ids)[:3]
    return ", ".join(repr(q) for q in first) + (", ..." if len(set(ids)) > 3 else "")


def depth_notes(measures: str | Iterable[str] | None, k: int, rerun: str = "k=") -> list[str]:
    """One note per measure that reads deeper than a run cut at ``k`` results per query: a cut-off above ``k``
    (R@100 with k=5), or no cut-off at all (AP, Rprec: the whole ranking) with ``k`` below trec_eval's conventional
    1,000. ``rerun`` words the fix: ``k=`` for Python, ``--k `` for the command line.

    >>> depth_notes(["nDCG@10", "R@100"], 5)  # doctest: +SKIP
    ['nDCG@10 looks at 10 results but the run kept k=5: rerun with k=10 or drop nDCG@10', ...]
    """
    parsed, names = _distinct_measures(measures)
    return _depth_notes(parsed, names, k, rerun)


def _depth_notes(parsed: Sequence[Any], names: Sequence[str], k: int, rerun: str = "k=") -> list[str]:
    notes = []
    for measure, name in zip(parsed, names):
        if measure.NAME in ("NumQ", "NumRel"):  # counts of the judgements, whatever the run holds
            continue
        params = getattr(measure, "params", None) or {}
        cutoff = params.get("cutoff")
        if cutoff is not None and not params.get("judged_only"):
            if cutoff > k:
                notes.append(f"{name} looks at {cutoff} results but the run kept k={k}: rerun with {rerun}{cutoff} "
                             f"or drop {name}")
        elif k < CONVENTIONAL_DEPTH:
            notes.append(f"{name} looks at the whole ranking ({CONVENTIONAL_DEPTH} results by trec_eval's convention) "
                         f"but the run kept k={k}: rerun with {rerun}{CONVENTIONAL_DEPTH} or drop {name}")
    return notes


def _read_depth(parsed: Sequence[Any]) -> int | None:
    """How many ranks the measures read: the largest cutoff when every measure has one, else None (all of them).
    A judged-only measure drops the unjudged documents before its cutoff, so it reads the whole ranking."""
    params = [getattr(m, "params", None) or {} for m in parsed]
    if not params or any(p.get("cutoff") is None or p.get("judged_only") for p in params):
        return None
    return int(max(p["cutoff"] for p in params))


def _distinct_measures(measures: str | Iterable[str] | None) -> tuple[list[Any], tuple[str, ...]]:
    """(parsed measures, their names); a ConfigError when a measure is listed twice."""
    parsed = parse_measures(measures)
    names = tuple(str(m) for m in parsed)
    if len(set(names)) != len(names):
        raise ConfigError(f"a measure is listed twice in {', '.join(names)}.")
    return parsed, names


def _own_values(parsed: Sequence[Any], judged: Mapping[str, Mapping[str, int]],
                run_dict: Mapping[str, Mapping[str, float]], built: Run | None) -> dict[str, dict[str, float]]:
    """measure name -> query -> value, for every judged query, of the measures gapbench computes itself
    (gapbench.evaluation.trec_params: trec_eval's measures ir-measures lacks, and trec_eval 10's iprec_at_recall)."""
    from . import trec_params

    own = [m for m in parsed if trec_params.computes(m)]
    if not own:
        return {}
    if built is None:
        built = Run(run_dict)
    ranked = {q: [d for d, _ in built[q]] for q in run_dict}
    return trec_params.values(own, judged, ranked, list(judged))


def _measured(parsed: Sequence[Any], names: Sequence[str], judged: Mapping[str, Mapping[str, int]],
              run_dict: Mapping[str, Mapping[str, float]], built: Run | None) -> dict[str, dict[str, float]]:
    """measure name -> query -> value for the queries the run ranks: trec_eval's measures through pytrec_eval with
    the run's own scores, the others through ir-measures with rank-derived scores (see ``_TREC_MEASURE``); those
    gapbench computes itself are :func:`_own_values`'."""
    from . import trec_params

    own = {n for m, n in zip(parsed, names) if trec_params.computes(m)}
    direct = {n: None if n in own else _trec_request(n) for n in names}
    out = _trec_eval_values(direct, judged, run_dict)
    rest = [m for m, n in zip(parsed, names) if not direct[n] and n not in own]
    if rest:
        out.update(_ir_measures_values(rest, judged, run_dict, built))
    return out


def _trec_eval_values(direct: Mapping[str, tuple[str, str] | None], judged: Mapping[str, Mapping[str, int]],
                      run_dict: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """measure name -> query -> value for the measures with a pytrec_eval request in ``direct``."""
    wanted = {n: r for n, r in direct.items() if r}
    requests = {r[0]: n for n, r in wanted.items()}
    if not requests:
        return {}
    import pytrec_eval

    out: dict[str, dict[str, float]] = {n: {} for n in requests.values()}
    keys = {wanted[n][1]: out[n] for n in requests.values()}
    for qid, values in pytrec_eval.RelevanceEvaluator(judged, set(requests)).evaluate(run_dict).items():
        for key, target in keys.items():
            target[qid] = values[key]
    return out


def _ir_measures_values(rest: Sequence[Any], judged: Mapping[str, Mapping[str, int]],
                        run_dict: Mapping[str, Mapping[str, float]], built: Run | None) -> dict[str, dict[str, float]]:
    """measure name -> query -> value through ir-measures, each ranking scored by its ranks (n, n-1, ..., 1)."""
    import ir_measures

    if built is None:
        built = Run(run_dict)
    ranks = _descending_ranks(max((len(r) for r in built.values()), default=0))
    rank_dict = {q: dict(zip([d for d, _ in built[q]], ranks[-len(built[q]):])) for q in run_dict}
    out: dict[str, dict[str, float]] = {str(m): {} for m in rest}
    by_id = {id(m): out[str(m)] for m in rest}  # ir-measures hashes measures through their repr
    for metric in ir_measures.evaluator(rest, judged).iter_calc(rank_dict):
        target = by_id.get(id(metric.measure))
        if target is None:
            target = out[str(metric.measure)]
        target[metric.query_id] = float(metric.value)
    return out


def _unranked_value(measure: Any, judgements: Mapping[str, int]) -> float:
    """A measure's value for a judged query the run does not rank (trec_eval ``-c``): NumQ counts the query and
    NumRel its relevant documents, as neither depends on the run; every other measure is 0."""
    if measure.NAME == "NumQ":
        return 1.0
    if measure.NAME == "NumRel":
        rel = measure.params.get("rel", 1)
        return float(sum(1 for grade in judgements.values() if grade >= rel))
    return 0.0


def _per_query_complete(parsed: Sequence[Any], names: Sequence[str], found: Mapping[str, Mapping[str, float]],
                        positive: Sequence[str], judged: Mapping[str, Mapping[str, int]],
                        ranked: Mapping[str, object]) -> dict[str, dict[str, float]]:
    """measure name -> every positive query -> value, :func:`_unranked_value` for a query the run does not rank
    (some backends report 0 for it); a GapbenchError for a value that is not finite."""
    from . import trec_params

    ordered: dict[str, dict[str, float]] = {}
    for measure, name in zip(parsed, names):
        values = found.get(name, {})
        own = trec_params.computes(measure)  # its values cover the queries the run lacks too (trec_eval -c)
        ordered[name] = {q: values.get(q, 0.0) if q in ranked or own else _unranked_value(measure, judged[q])
                         for q in positive}
        bad = [q for q, v in ordered[name].items() if not math.isfinite(v)]
        if bad:
            raise GapbenchError(f"{name} is not finite for query {bad[0]!r}.")
    return ordered
