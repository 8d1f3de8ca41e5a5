"""trec_eval's words: its measure names read as ir-measures measures, and its output layout (``trec_eval [-q]``).

trec_eval names a measure ``map``, ``P_10`` (given as ``-m P.10``), ``ndcg_cut_10``, ``recall_100``, ``recip_rank``,
``bpref``, ``Rprec``, ``num_ret``...; ir-measures names the same measures ``AP``, ``P@10``, ``nDCG@10``, ``R@100``,
``RR``, ``Bpref``, ``Rprec``, ``NumRet``. gapbench accepts both (trec_eval's case-insensitively, with ``_`` or ``.``
before the parameter), computes with ir-measures names, and prints trec_eval's names in trec_eval's layout.

trec_eval's measures with no ir-measures equivalent (``gm_map``, ``gm_bpref``, ``Rprec_mult``, ``utility``,
``11pt_avg``, ``binG``, ``G``, ``dcg``, ``ideal_dcg``, ``ndcg`` with gains, ``ndcg_rel``, ``Rndcg``, ``relative_P``,
``num_nonrel_judged_ret``, ``rbp``, ``rbp_resid``, ``unj``) gapbench computes itself
(:mod:`gapbench.evaluation.trec_measures`) and keeps under trec_eval's own names. ``runid`` and ``relstring`` are
text, not measures: ``gapbench evaluate`` prints them beside the measures (:data:`TEXTS`, :func:`text_line`). Not
computed: ``yaap`` and the preference measures (``prefs_*``, ``*_avgjg``), which read other judgement formats.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from .errors import TrecNameError

# trec_eval's measures in the order it prints them (the table in its measures.c), each with the ir-measures measure
# it is: a format string taking the measure's parameter ({0}) or a plain name, and whether it needs the parameter. An
# empty template marks a measure gapbench computes itself under trec_eval's name (gapbench.evaluation.trec_measures).
_FAMILIES: tuple[tuple[str, str, bool], ...] = (
    ("num_q", "NumQ", False),
    ("num_ret", "NumRet", False),
    ("num_rel", "NumRel", False),
    ("num_rel_ret", "NumRet(rel=1)", False),
    ("map", "AP", False),
    ("gm_map", "", False),
    ("Rprec", "Rprec", False),
    ("bpref", "Bpref", False),
    ("recip_rank", "RR", False),
    ("iprec_at_recall", "IPrec@{0}", True),
    ("P", "P@{0}", True),
    ("recall", "R@{0}", True),
    ("infAP", "infAP", False),
    ("gm_bpref", "", False),
    ("Rprec_mult", "", True),
    ("utility", "", False),
    ("11pt_avg", "", False),
    ("binG", "", False),
    ("G", "", False),
    ("dcg", "", False),
    ("ideal_dcg", "", False),
    ("ndcg", "nDCG", False),
    ("ndcg_rel", "", False),
    ("Rndcg", "", False),
    ("ndcg_cut", "nDCG@{0}", True),
    ("map_cut", "AP@{0}", True),
    ("relative_P", "", True),
    ("success", "Success@{0}", True),
    ("set_P", "SetP", False),
    ("set_relative_P", "SetP(relative=True)", False),
    ("set_recall", "SetR", False),
    ("set_map", "SetAP", False),
    ("set_F", "SetF", False),
    ("num_nonrel_judged_ret", "", False),
    ("rbp", "", False),
    ("rbp_resid", "", False),
    ("unj", "", True),
)
# trec_eval's measures gapbench does not compute (see the module's docstring), refused by name.
UNSUPPORTED = ("runid", "relstring", "yaap", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg")
_TEXT_NAME = re.compile(r"^(runid|relstring(?:[._](?P<length>[0-9]+))?)$", re.IGNORECASE)
# trec_eval's parameters after a measure that takes a list (utility.1,-1,0,0; ndcg.1=3,2=9; rbp.p=0.8), which
# gapbench's list splitting cuts at the commas: joined back (join_lists).
_LIST_FAMILIES = ("utility", "11pt_avg", "G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "rbp", "rbp_resid")
_LIST_PART = re.compile(r"^(?:[+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|[+-]?[0-9]+=[^,=]+|p=[^,=]+)$")
# trec_eval's named sets of measures (its measures.c) with their default parameters, as gapbench names them.
_CUTOFFS = ("5", "10", "15", "20", "30", "100", "200", "500", "1000")
OFFICIAL = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
            *(f"iprec_at_recall_{i / 10:.2f}" for i in range(11)), *(f"P_{c}" for c in _CUTOFFS))
ALL_TREC = (*OFFICIAL, *(f"recall_{c}" for c in _CUTOFFS), *(f"unj_{c}" for c in ("5", "10", "20")), "rbp",
            "rbp_resid", "infAP", "gm_bpref", "utility", "11pt_avg", "ndcg", *(f"relative_P_{c}" for c in _CUTOFFS),
            *(f"Rprec_mult_{i / 5:.2f}" for i in range(1, 11)), "relstring", "success_1", "success_5", "success_10",
            *(f"map_cut_{c}" for c in _CUTOFFS), *(f"ndcg_cut_{c}" for c in _CUTOFFS), "ndcg_rel", "Rndcg", "binG",
            "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret")
SETS = {"official": OFFICIAL, "all_trec": ALL_TREC}
# Measures whose all row is a geometric mean: their per-query values are logs (trec_eval's m_gm_map.c, m_gm_bpref.c).
GEOMETRIC = ("gm_map", "gm_bpref")
_UNSUPPORTED = {name.casefold(): name for name in UNSUPPORTED}
_BY_NAME = {name.casefold(): (name, template, takes) for name, template, takes in _FAMILIES}
# What trec_eval prints that is text, not a measure (its runid and relstring), which gapbench evaluate prints beside
# the measures' lines (TEXTS: the CLI gives them; the Python API refuses them as measures).
TEXTS = ("runid", "relstring")
_PRINTED = ("runid", *[n for n, _, _ in _FAMILIES[:_FAMILIES.index(("P", "P@{0}", True)) + 1]], "relstring",
            *[n for n, _, _ in _FAMILIES[_FAMILIES.index(("P", "P@{0}", True)) + 1:]])
_ORDER = {name: i for i, name in enumerate(_PRINTED)}
NAMES = tuple(name for name, _, _ in _FAMILIES)
# Counts whose `all` row trec_eval sums over the queries (every other measure is averaged).
_COUNTS = re.compile(r"^(NumQ|NumRet|NumRel|NumRelRet)(\(.*\))?$|^num_nonrel_judged_ret$")
_PARAM = re.compile(r"^(?P<name>[A-Za-z_]+?)(?:[._](?P<param>[0-9]+(?:\.[0-9]*)?|\.[0-9]+))?$")
_INTEGERS = ("num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")

EXAMPLES = "map, P_10 (or P.10), ndcg_cut_10, recall_100, recip_rank, bpref, Rprec, num_ret"


def from_trec(text: str) -> str | None:
    """The ir-measures spelling of trec_eval's measure ``text`` (``P.10`` -> ``P@10``, ``map`` -> ``AP``), or None
    when ``text`` is not a trec_eval measure name. Raises :class:`TrecNameError` for a trec_eval measure that is
    missing the cut-off gapbench needs, or that takes none."""
    m = _PARAM.match(text)
    family = m.group("name").casefold() if m else text.casefold()
    if family in _UNSUPPORTED or family.startswith("prefs_"):
        raise TrecNameError(f"gapbench does not compute trec_eval's {_UNSUPPORTED.get(family, family)} (text, or "
                            f"other judgement formats); the trec_eval measures it computes are {', '.join(NAMES)}, "
                            f"or the sets {' and '.join(SETS)}")
    found = _BY_NAME.get(family) if m else None
    if m is None or found is None:
        return _ir_case(text)
    if not found[1]:
        return None  # computed by gapbench itself (gapbench.evaluation.trec_params reads its parameters)
    param = m.group("param")
    name, template, takes = found
    if takes and param is None:
        example = "iprec_at_recall_0.10" if name == "iprec_at_recall" else f"{name}_10 or {name}.10"
        raise TrecNameError(f"trec_eval's {name} needs its parameter here, one measure each, for example {example}")
    if not takes and param is not None:
        raise TrecNameError(f"trec_eval's {name} takes no parameter; write it as {name}")
    if not takes:
        return template
    if name != "iprec_at_recall":
        whole = cut_off(param)
        if whole is None:
            raise TrecNameError(f"the cut-off of trec_eval's {name} is a whole number, got {param!r}")
        param = str(whole)
    else:
        param = repr(float(param))
    return template.format(param)


_IR_NAME = re.compile(r"^(?P<name>[^\W\d]\w*)(?P<rest>(?:\(.*\))?(?:@.*)?)$", re.DOTALL)


def _ir_case(text: str) -> str | None:
    """``text`` with its measure name spelt as ir-measures spells it, when the name differs from one of ir-measures'
    names in case only and from no other (``ndcg@10`` -> ``nDCG@10``, ``rr`` -> ``RR``), else None: a name that
    stays unambiguous is read whatever its case, as trec_eval's names are."""
    import ir_measures

    m = _IR_NAME.match(text)
    if m is None:
        return None
    registry = ir_measures.measures.registry
    if m.group("name") in registry:
        return None
    # aliases (nDCG and NDCG, Bpref and BPref) are one measure: unambiguous, spelt by the measure's own name
    same = {registry[n].NAME for n in registry if n.casefold() == m.group("name").casefold()}
    return same.pop() + m.group("rest") if len(same) == 1 else None


_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]*)?$|^\.[0-9]+$")


def family_and_param(text: str) -> tuple[str | None, str | None]:
    """(trec_eval's family, the parameter as written) of a measure name (``P.10`` -> ``("P", "10")``, ``map`` ->
    ``("map", None)``); the family is None when trec_eval has no such measure."""
    m = _PARAM.match(text.strip())
    if m is None:
        return None, None
    found = _BY_NAME.get(m.group("name").casefold())
    return (found[0] if found else None), m.group("param")


def join_lists(parts: Sequence[str]) -> list[str]:
    """trec_eval's list form read as trec_eval reads it: ``-m P.5,10`` is P at 5 and at 10, so a bare number after a
    trec_eval measure with a parameter is another parameter of that measure (``["P.5", "10"]`` -> ``["P.5",
    "P.10"]``). Anything else is left as it is (a bare number alone is then refused as no measure)."""
    out: list[str] = []
    family: str | None = None
    listing = False
    for part in parts:
        if listing and _LIST_PART.match(part):
            out[-1] += "," + part
            continue
        if family is not None and _NUMBER.match(part):
            out.append(f"{family}.{part}")
            continue
        out.append(part)
        listing = _family_of(part) in _LIST_FAMILIES and part.casefold() != (_family_of(part) or "").casefold()
        m = _PARAM.match(part)
        found = _BY_NAME.get(m.group("name").casefold()) if m and m.group("param") is not None else None
        family = found[0] if found is not None and found[2] else None
    return out


def cut_off(param: str) -> int | None:
    """A rank cut-off read as trec_eval reads it (atol in its meas_init.c): the digits before any decimal point, so
    ``ndcg_cut.23.4`` is ndcg_cut_23; None when there are none."""
    whole = param.split(".", 1)[0]
    return int(whole) if whole.isascii() and whole.isdigit() else None


def _family_of(text: str) -> str | None:
    """The trec_eval family ``text`` names (``ndcg_cut`` for ``ndcg_cut.10``, ``ndcg`` for ``ndcg.1=3``), or None."""
    folded = text.casefold()
    for name in sorted(NAMES, key=len, reverse=True):
        if folded == name.casefold() or any(folded.startswith(name.casefold() + sep) for sep in "._"):
            return name
    return None


def to_trec(measure: str) -> str | None:
    """trec_eval's name for the ir-measures measure named ``measure`` (``nDCG@10`` -> ``ndcg_cut_10``), or None when
    trec_eval has no name for it (other parameters, or a measure trec_eval lacks)."""
    import ir_measures

    try:
        parsed = ir_measures.parse_measure(measure)
    except Exception:  # a spelling ir-measures' own parser does not read back: trec_eval has no name for it either
        return None
    for name, template, takes in _FAMILIES:
        if not template:
            continue
        if not takes:
            candidate = name
        else:
            param = parsed.params.get(parsed.AT_PARAM) if parsed.AT_PARAM else None
            if param is None or template.split("@")[0] != parsed.NAME:
                continue
            candidate = f"{name}_{param:.2f}" if name == "iprec_at_recall" else f"{name}_{param}"
        ir_text = from_trec(candidate)
        if ir_text is not None and str(ir_measures.parse_measure(ir_text)) == str(parsed):
            return candidate
    return None


def is_count(measure: str) -> bool:
    """Whether trec_eval's summary row sums ``measure`` over the queries (NumQ, NumRet, NumRel, NumRelRet,
    num_nonrel_judged_ret)."""
    return bool(_COUNTS.match(measure))


def is_geometric(measure: str) -> bool:
    """Whether trec_eval's summary row of ``measure`` is a geometric mean (gm_map, gm_bpref): its per-query values
    are logs, and the row is exp of their mean."""
    return measure in GEOMETRIC


def summary_value(measure: str, mean: float, n_queries: int) -> float:
    """trec_eval's ``all`` value of ``measure`` from the mean of its per-query values over ``n_queries``."""
    if is_count(measure):
        return mean * n_queries
    return math.exp(mean) if is_geometric(measure) else mean


def text_line(text: str) -> tuple[str, int] | None:
    """(printed name, length) when ``text`` names one of trec_eval's text lines: ``runid`` (0), ``relstring`` (its
    default length, 10) or ``relstring.20`` (``relstring_20``, 20); else None."""
    m = _TEXT_NAME.match(text.strip())
    if m is None:
        return None
    if m.group(1).casefold() == "runid":
        return ("runid", 0)
    length = m.group("length")
    return ("relstring", 10) if length is None else (f"relstring_{int(length)}", int(length))


def expand_sets(parts: Sequence[str], *, texts: bool = False) -> list[str]:
    """trec_eval's named sets (``all_trec``, ``official``) replaced by their measures, as gapbench names them, and
    with ``texts`` its text lines (runid, relstring) too; anything else kept. With a set, a measure named twice (in
    the set and beside it) is kept once, where it first appears, as trec_eval takes ``-m all_trec -m map``; without
    one, ``parts`` are returned as they are."""
    if not any(part.strip() in SETS for part in parts):
        return list(parts)
    out: list[str] = []
    for part in parts:
        named = SETS.get(part.strip())
        if named is not None and not texts:
            named = tuple(n for n in named if n not in TEXTS)
        for name in named or (part,):
            if name not in out:
                out.append(name)
    return out


def _printed_name(measure: str) -> str:
    return to_trec(measure) or measure


def _order_key(printed: str) -> tuple[int, float]:
    """trec_eval's order: its measure table, and within a family the parameters ascending (P_5, P_10, P_15)."""
    for name in sorted(_ORDER, key=len, reverse=True):
        if printed == name:
            return (_ORDER[name], 0.0)
        if printed.startswith(name + "_"):
            try:
                return (_ORDER[name], float(printed[len(name) + 1:]))
            except ValueError:  # a list parameter (utility_2,-1,0,0): one line per family
                return (_ORDER[name], 0.0)
    return (len(_ORDER), 0.0)


def _value(printed: str, value: float, integers: bool = True) -> str:
    if math.isnan(value):  # trec_eval's 0.0 / 0.0 (iprec_at_recall of an empty ranking), as glibc prints it on x86
        return "  -nan"
    return str(int(round(value))) if integers and printed in _INTEGERS else f"{value:6.4f}"


def _line(name: str, qid: str, value: str) -> str:
    return f"{name:<22}\t{qid}\t{value}"


def trec_eval_lines(measures: Iterable[str], per_query: Mapping[str, Mapping[str, float]],
                    summary: Mapping[str, float], *, queries: bool,
                    texts: Mapping[str, Mapping[str, str]] | None = None, totals: bool = True, prefix: str = "",
                    integers: bool = True) -> list[str]:
    """The lines ``trec_eval [-q] [-n] -m ...`` prints: with ``queries``, every query's lines (queries in trec_eval's
    sorted order, each query's measures in trec_eval's order), then with ``totals`` the ``all`` rows. Measures
    trec_eval has no name for are printed under their ir-measures name, after trec_eval's own. ``texts`` (printed
    name -> query or ``all`` -> text) are trec_eval's lines that are no measure (``runid``, ``relstring``), printed in
    its order. ``prefix`` (``Z`` with trec_eval's -Z) goes before each measure's name, and ``integers`` False prints
    the counts as the other values (both as trec_eval -Z prints them)."""
    texts = texts or {}
    named = sorted([*((_printed_name(m), m) for m in measures), *((t, "") for t in texts)],
                   key=lambda p: _order_key(p[0]))
    lines = []
    measured = [m for _, m in named if m]
    if queries and measured:
        qids = sorted(per_query[measured[0]])
        for qid in qids:
            for printed, m in named:
                if printed == "num_q" or is_geometric(printed):
                    continue  # trec_eval prints these in the summary only
                if not m:
                    if qid in texts[printed]:
                        lines.append(_line(printed, qid, texts[printed][qid]))
                    continue
                lines.append(prefix + _line(printed, qid, _value(printed, per_query[m][qid], integers)))
    if not totals:
        return lines
    for printed, m in named:
        if not m:
            if "all" in texts[printed]:
                lines.append(_line(printed, "all", texts[printed]["all"]))
            continue
        lines.append(prefix + _line(printed, "all", _value(printed, summary[m], integers)))
    return lines
