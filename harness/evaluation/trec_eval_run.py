"""What ``trec_eval`` computes, as its main loop (trec_eval.c, version 10.0) computes it: the queries it evaluates, its
``-l``, ``-M``, ``-J``, ``-N``, ``-c`` and ``-Z`` options, and every measure of ``-m all_trec`` by trec_eval's own
name. ``gapbench trec_eval`` (gapbench.cli.trec_eval) prints :func:`run_trec_eval`'s result with
:func:`gapbench.trec_names.trec_eval_lines`.

Which queries: those of the qrels that the run ranks, in the qrels' sorted order; a run's query absent from the qrels
is ignored; with ``complete`` (``-c``) a query of the qrels the run lacks is evaluated too, as trec_eval evaluates it
(a stand-in ranking whose values are 0 but for num_q and num_rel). A query without any positive judgement is evaluated
as every other (``gapbench evaluate`` drops it; trec_eval does not).

Where the values come from: the measures of :mod:`gapbench.evaluation.trec_measures` (and trec_eval 10's
iprec_at_recall) from gapbench's own code; the others (map, P, recall, ndcg_cut, bpref, infAP, set_*, ...) from
pytrec_eval, which embeds trec_eval's own C code, with the same relevance level and the run cut as ``-M`` and ``-J``
cut it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from .. import trec_names
from ..errors import GapbenchError
from ..types import Qrels, Run
from . import trec_measures, trec_params

# trec_eval's families whose parameters are cut-offs, one printed measure per parameter (meas_init.c's
# te_init_meas_a_float_cut_long / _float): the others take their whole parameter text as one measure.
CUT_FAMILIES = ("iprec_at_recall", "P", "recall", "Rprec_mult", "ndcg_cut", "map_cut", "relative_P", "success",
                "unj")
# The measures whose all row is a sum over the queries.
COUNTS = frozenset({"num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"})
# Each flag of trec_eval 10 and what gapbench trec_eval does with it (docs/trec-eval.md's table: doc_tables).
FLAGS: tuple[tuple[str, str, str], ...] = (
    ("-q", "per-query lines, then the summary", "as trec_eval"),
    ("-m measure[.params]", "a measure, its parameters, or a set (official, all_trec); repeatable", "as trec_eval"),
    ("-c", "evaluate the queries of the qrels the run lacks (0 but num_q, num_rel)", "as trec_eval"),
    ("-l num", "the lowest grade that is relevant", "as trec_eval"),
    ("-n", "no summary (all) lines", "as trec_eval"),
    ("-M num", "evaluate each query's top num documents", "as trec_eval"),
    ("-J", "drop the documents the qrels do not grade before evaluating", "as trec_eval"),
    ("-N num", "documents in the collection (utility's fourth weight)", "as trec_eval"),
    ("-Z file", "z-scores against a file of per-query means and deviations", "as trec_eval"),
    ("-R format", "qrels format: qrels (the default)", "qrels only; prefs, qrels_prefs and qrels_jg refused"),
    ("-T format", "run format: trec_results (the default)", "trec_results only"),
    ("-D num", "debug output", "refused"),
    ("-o", "obsolete in trec_eval 10", "accepted, ignored (as trec_eval)"),
    ("-h, -v", "help, version", "gapbench's help; gapbench's version"),
    ("--ci", "gapbench's own: a fourth column on each all line, the mean's 95% bootstrap CI", "gapbench only"),
)
# trec_eval.c's stand-in ranking of a query the run lacks (-c), and the measures it resets after evaluating it, by
# their printed names (strcmp: utility_2,-1,0,0 and rbp_resid_p=0.5 keep the stand-in's values; strncmp: every unj)
STAND_IN = "ceci_nest_pas_un_docno"
STAND_IN_ZERO = frozenset({"num_ret", "utility", "rbp_resid"})
# What trec_eval prints as MISSING_ZSCORE_VALUE (trec_eval.h) for a measure or query the Z file lacks.
MISSING_ZSCORE = -1000000.0


class TrecEvalError(GapbenchError):
    """What trec_eval refuses (an unknown measure, no query to evaluate), in one line."""


@dataclass
class TrecEvalResult:
    """Per printed measure name, each evaluated query's value; the summary (``all``) values; the text lines."""

    measures: list[str]
    per_query: dict[str, dict[str, float]]
    summary: dict[str, float]
    texts: dict[str, dict[str, str]] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Wanted:
    printed: str
    own: trec_params.TrecMeasure | tuple[str, float] | None = None  # or ("iprec", recall level)
    request: str | None = None  # pytrec_eval's request (P.10) and key (P_10)
    key: str | None = None


def measure_names(args: Sequence[str]) -> list[str]:
    """trec_eval's ``-m`` arguments (``all_trec``, ``P.5,10``, ``utility.2,-1,0,0``) as one name per printed
    measure (``P.5``, ``P.10``, ``utility.2,-1,0,0``); no ``-m``: ``official``. As trec_eval's mark_measure reads
    them: a family's first ``-m`` with parameters sets its parameters, wherever the family is named (``-m all_trec
    -m P.5`` prints P_5 alone, ``-m P.5 -m P.10`` too); a family named without (alone or in a set) gets trec_eval's
    defaults only when no ``-m`` gives it parameters."""
    args = list(args) or ["official"]
    explicit: dict[str, list[str]] = {}
    for arg in args:
        family, params = _family(arg)
        if family is not None and params and family not in explicit:
            explicit[family] = _split(arg, family, params)
    out: list[str] = []
    for arg in args:
        for name in trec_names.SETS.get(arg.strip(), (arg,)):
            family, params = _family(name)
            if family is None:
                found = [name]
            elif family in explicit:
                found = explicit[family]
            elif params and name != arg:
                found = [name]  # a set's default parameter
            else:
                found = _defaults(family)
            out.extend(n for n in found if n not in out)
    return out


def _family(name: str) -> tuple[str | None, str]:
    """(trec_eval's family of ``name``, casefolded, or None; its parameter text)."""
    folded = name.strip().casefold()
    for family in sorted((*trec_names.NAMES, *trec_names.TEXTS), key=len, reverse=True):
        f = family.casefold()
        if folded == f:
            return family, ""
        if folded.startswith(f) and folded[len(f):len(f) + 1] in (".", "_"):
            return family, name.strip()[len(f) + 1:]
    return None, ""


def _split(arg: str, family: str, params: str) -> list[str]:
    if family in CUT_FAMILIES:
        return [f"{family}.{p}" for p in params.split(",") if p]
    return [arg.strip()]


def _defaults(family: str) -> list[str]:
    """The names trec_eval prints for ``family`` named without parameters (its defaults, as all_trec holds them)."""
    return [n for n in trec_names.ALL_TREC if _family(n)[0] == family and (n == family or _family(n)[1])] or [family]


def _resolve(name: str) -> _Wanted | tuple[str, int]:
    """A measure name as trec_eval reads it: a text line ((printed name, length)) or a measure to compute."""
    text = trec_names.text_line(name)
    if text is not None:
        return text
    try:
        own = trec_params.parse(name)
    except trec_params.ParamError as exc:
        raise TrecEvalError(f"illegal measure '{name}': {exc}") from None
    if own is not None:
        return _Wanted(str(own), own=own)
    family, param = trec_names.family_and_param(name)
    if family is None or family in trec_names.UNSUPPORTED:
        raise TrecEvalError(f"illegal measure '{name}' (gapbench computes trec_eval's {', '.join(trec_names.NAMES)}, "
                            f"runid, relstring, and the sets {' and '.join(trec_names.SETS)})")
    takes = family in CUT_FAMILIES
    if takes and param is None:
        raise TrecEvalError(f"illegal measure '{name}': trec_eval's {family} needs a parameter here")
    if family == "iprec_at_recall":
        recall = float(param or 0)
        return _Wanted(f"iprec_at_recall_{recall:.2f}", own=("iprec", recall))
    if not takes:
        if param is not None:
            raise TrecEvalError(f"illegal measure '{name}': trec_eval's {family} takes no parameter")
        return _Wanted(family, request=family, key=family)
    cut = trec_names.cut_off(param or "")
    if cut is None:
        raise TrecEvalError(f"illegal measure '{name}': the cut-off of {family} is a whole number")
    return _Wanted(f"{family}_{cut}", request=f"{family}.{cut}", key=f"{family}_{cut}")


def _ranked(run: Run, qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str], max_docs: int | None,
            judged_only: bool) -> dict[str, list[tuple[str, float]]]:
    """Each query's ranking as form_res_rels.c reads it: trec_eval's order (score descending, then doc id descending,
    which a Run keeps), cut at ``max_docs`` (-M), then with ``judged_only`` (-J) the documents without a grade of 0
    or more dropped."""
    out = {}
    for q in qids:
        if q not in run:
            continue
        ranking = list(run[q])
        if max_docs is not None:
            ranking = ranking[:max(max_docs, 0)]
        if judged_only:
            judged = qrels.get(q, {})
            ranking = [(d, s) for d, s in ranking if judged.get(d, -1) >= 0]
        out[q] = ranking
    return out


def run_trec_eval(run: Run, qrels: Qrels, measures: Sequence[str], *, level: int = 1, complete: bool = False,
                  max_docs: int | None = None, judged_only: bool = False, num_docs: int = 0,
                  zscores: Mapping[str, Mapping[str, tuple[float, float]]] | None = None) -> TrecEvalResult:
    """``trec_eval [-c] [-l level] [-M max_docs] [-J] [-N num_docs] [-Z file] -m ...`` on ``run`` and ``qrels``:
    every evaluated query's value of each measure ``measures`` names (:func:`measure_names`'s names), and the
    ``all`` row. ``zscores``: query -> measure -> (mean, standard deviation), trec_eval's ``-Z`` file."""
    if level < 1:  # pytrec_eval, which computes the measures trec_eval's C code computes, takes levels from 1
        raise TrecEvalError(f"-l {level}: gapbench evaluates relevance levels from 1 (a grade of 0 or less is not "
                            "relevant); give -l 1 or more")
    wanted: list[_Wanted] = []
    texts: list[tuple[str, int]] = []
    for name in measures:
        found = _resolve(name)
        if isinstance(found, tuple):
            if found not in texts:
                texts.append(found)
        elif all(w.printed != found.printed for w in wanted):
            wanted.append(found)
    qids = sorted(q for q in qrels if complete or q in run)
    if not qids:
        raise TrecEvalError("No queries with both results and relevance info")
    judged = qrels.judgements(qids)
    ranked = _ranked(run, judged, qids, max_docs, judged_only)
    lists = {q: [d for d, _ in r] for q, r in ranked.items()}
    # trec_eval.c's stand-in for a query the run lacks (-c): one document the qrels cannot hold (which -J drops);
    # after evaluating it, trec_eval resets the measures STAND_IN_ZERO names
    stand_ins = frozenset(q for q in qids if q not in lists)
    lists.update({q: [] if judged_only else [STAND_IN] for q in stand_ins})
    per_query: dict[str, dict[str, float]] = {}
    own = [w for w in wanted if w.own is not None]
    if own:
        per_query.update(_own(own, judged, lists, qids, level, num_docs, stand_ins))
    direct = [w for w in wanted if w.request is not None]
    if direct:
        per_query.update(_pytrec(direct, judged, ranked, qids, level))
    names = [w.printed for w in wanted]
    per_query = {n: per_query[n] for n in names}
    if zscores is not None:
        per_query = {n: values if n == "num_q" else {q: _zscore(v, zscores.get(q), n) for q, v in values.items()}
                     for n, values in per_query.items()}  # num_q counts queries: trec_eval converts no value of it
    summary = {n: _summary(n, per_query[n]) for n in names}
    if complete and "num_rel" in summary:  # m_num_rel.c with -c: every qrels line graded above 0, whatever -l says
        summary["num_rel"] = float(sum(1 for q in qrels for g in qrels[q].values() if g > 0))
    text_values: dict[str, dict[str, str]] = {}
    for printed, length in texts:
        if printed == "runid":
            text_values[printed] = {"all": run.name}
        else:
            rankings = trec_measures.Rankings.of(judged, lists, query_ids=qids, level=level)
            text_values[printed] = {q: "''" if q in stand_ins and printed == "relstring" else f"'{s}'"
                                    for q, s in zip(rankings.query_ids, trec_measures.relstring(rankings, length))}
    return TrecEvalResult(names, per_query, summary, text_values, qids)


def _own(wanted: Sequence[_Wanted], judged: Mapping[str, Mapping[str, int]], lists: Mapping[str, Sequence[str]],
         qids: Sequence[str], level: int, num_docs: int, stand_ins: frozenset[str],
         block: int = 4096) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {w.printed: {} for w in wanted}
    for start in range(0, len(qids), block):
        part = list(qids[start:start + block])
        rankings = trec_measures.Rankings.of(judged, lists, query_ids=part, level=level)
        stand_in = np.array([q in stand_ins for q in part], dtype=bool)
        for w in wanted:
            if not isinstance(w.own, trec_params.TrecMeasure):  # ("iprec", recall level)
                recall = cast(tuple[str, float], w.own)[1]
                found = np.where(_nan_at(rankings, [recall]), math.nan, trec_measures.iprec_at_recall(rankings, recall))
            else:
                measure = w.own
                if measure.family == "utility" and num_docs:
                    weights = measure.numbers() if measure.text else (1.0, -1.0, 0.0, 0.0)
                    found = trec_measures.utility(rankings, weights, num_docs)
                else:
                    found = measure.compute(rankings)
                if measure.family == "11pt_avg":
                    levels = measure.numbers() if measure.text else trec_measures.ELEVEN_POINTS
                    found = np.where(_nan_at(rankings, levels), math.nan, found)
                if w.printed in STAND_IN_ZERO or w.printed.startswith("unj"):
                    found = np.where(stand_in, 0.0, found)
            out[w.printed].update(zip(part, found.tolist()))
    return out


def _nan_at(rankings: trec_measures.Rankings, recalls: Sequence[float]) -> np.ndarray:
    """Where trec_eval's iprec_at_recall and 11pt_avg are 0 / 0 (m_iprec_at_recall.c): a ranking -J or -M left
    empty, at a recall level that is 0 documents of its num_rel (lround)."""
    empty = rankings.num_ret == 0
    at_zero = np.zeros(len(empty), dtype=bool)
    for recall in recalls:
        at_zero |= trec_measures.lround(recall * rankings.num_rel.astype(np.float64)) == 0
    return np.asarray(empty & at_zero)


def _pytrec(wanted: Sequence[_Wanted], judged: Mapping[str, Mapping[str, int]],
            ranked: Mapping[str, Sequence[tuple[str, float]]], qids: Sequence[str],
            level: int) -> dict[str, dict[str, float]]:
    """The measures pytrec_eval computes (trec_eval's C code), for the queries the run ranks; a query the run lacks
    (-c) is 0 on each but num_q (1) and num_rel (its relevant documents)."""
    import pytrec_eval

    out: dict[str, dict[str, float]] = {w.printed: {} for w in wanted}
    scores = {q: dict(r) for q, r in ranked.items() if r}
    if scores:
        requests = {str(w.request) for w in wanted}
        evaluator = pytrec_eval.RelevanceEvaluator({q: dict(judged[q]) for q in scores}, requests,
                                                   relevance_level=level)
        for qid, values in evaluator.evaluate(scores).items():
            for w in wanted:
                out[w.printed][qid] = float(values[str(w.key)])
    for q in qids:
        if q in scores:
            continue
        relevant = sum(1 for g in judged[q].values() if g >= level)
        for w in wanted:
            out[w.printed][q] = {"num_q": 1.0, "num_rel": float(relevant)}.get(w.printed, 0.0)
    return out


def _zscore(value: float, means: Mapping[str, tuple[float, float]] | None, name: str) -> float:
    """convert_zscores.c: (value - mean) / deviation, 0 where the deviation is 0 and the value the mean, else
    trec_eval's missing value."""
    if means is None or name not in means:
        return MISSING_ZSCORE
    mean, deviation = means[name]
    if deviation:
        return (value - mean) / deviation
    return 0.0 if value == mean else MISSING_ZSCORE


def _summary(name: str, values: Mapping[str, float]) -> float:
    """trec_eval's all row (meas_acc.c, meas_avg.c): the sum for the counts, exp of the mean for gm_map and gm_bpref
    (each query's value is a log), the mean otherwise; added one by one in query order, as trec_eval adds."""
    total = 0.0
    for q in sorted(values):
        total += values[q]
    if name in COUNTS:
        return total
    mean = total / len(values) if values else 0.0
    return math.exp(mean) if name in trec_names.GEOMETRIC else mean


def read_zscores(path: str) -> dict[str, dict[str, tuple[float, float]]]:
    """trec_eval's -Z file: ``qid measure mean deviation`` per line (get_zscores.c)."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise TrecEvalError(f"{path}:{n}: a -Z line is 'qid measure mean deviation', got {line.strip()!r}")
            try:
                out.setdefault(parts[0], {})[parts[1]] = (float(parts[2]), float(parts[3]))
            except ValueError:
                raise TrecEvalError(f"{path}:{n}: mean and deviation are numbers, got {line.strip()!r}") from None
    return out


# ---------------------------------------------------------------------------- docs/trec-eval.md's tables

DOC_START = "<!-- generated by gapbench.evaluation.trec_eval_run.doc_tables: do not edit -->"
DOC_END = "<!-- end of generated tables -->"


def doc_tables() -> str:
    """docs/trec-eval.md's tables of every flag and every measure of trec_eval 10 with what gapbench does with it,
    made from the tables the code reads (:data:`FLAGS`, gapbench.trec_names' families and sets,
    gapbench.evaluation.trec_measures' families), so the page cannot drift from the code
    (tests/test_trec_eval_command.py regenerates and compares; ``python -m gapbench.evaluation.trec_eval_run
    docs/trec-eval.md`` rewrites it)."""
    lines = [DOC_START, "", "| flag | trec_eval | gapbench trec_eval |", "|---|---|---|"]
    lines += [f"| `{flag}` | {what} | {status} |" for flag, what, status in FLAGS]
    lines += ["", "| measure | all_trec's parameters | computed by |", "|---|---|---|"]
    for name in (*trec_names.NAMES[:trec_names.NAMES.index("P") + 1], "relstring",
                 *trec_names.NAMES[trec_names.NAMES.index("P") + 1:]):
        defaults = [n for n in trec_names.ALL_TREC if _family(n)[0] == name and n != name]
        shown = ", ".join(_family(n)[1] for n in defaults) if defaults else "none"
        sets = "official, all_trec" if any(_family(n)[0] == name for n in trec_names.OFFICIAL) else "all_trec" \
            if any(_family(n)[0] == name for n in trec_names.ALL_TREC) else "neither"
        resolved = _resolve(defaults[0] if defaults else name)
        if isinstance(resolved, tuple):
            how = "gapbench (text: each query's top grades)"
        elif resolved.own is not None:
            how = "gapbench (`trec_measures`)"
        else:
            how = "pytrec_eval (trec_eval's C code)" + ("; with grade=gain pairs, gapbench (`trec_measures`)"
                                                        if name in trec_params.PAIRS else "")
        lines.append(f"| `{name}` ({sets}) | {shown} | {how} |")
    lines.append("| `runid` (official, all_trec) | none | gapbench (text: the run's tag) |")
    refused = [n for n in trec_names.UNSUPPORTED if n not in trec_names.TEXTS]
    lines.append(f"| {', '.join(f'`{n}`' for n in refused)}, `prefs_*` | | refused by name (other judgement "
                 "formats) |")
    return "\n".join([*lines, "", DOC_END])


def write_doc_tables(path: str) -> bool:
    """Rewrite the generated part of the page at ``path``; whether it changed."""
    from pathlib import Path

    page = Path(path).read_text(encoding="utf-8")
    head, _, rest = page.partition(DOC_START)
    _, _, tail = rest.partition(DOC_END)
    new = head + doc_tables() + tail
    if new != page:
        Path(path).write_text(new, encoding="utf-8")
    return new != page


if __name__ == "__main__":  # python -m gapbench.evaluation.trec_eval_run docs/trec-eval.md
    import sys

    print("rewritten" if write_doc_tables(sys.argv[1]) else "up to date")
