"""trec_eval's measures that gapbench computes itself, as named: a family and its parameter read as trec_eval's
meas_init.c reads them (``Rprec_mult.0.2``, ``utility.2,-1,0,0``, ``ndcg.1=3,2=9``), printed under trec_eval's names,
and their per-query values through :mod:`.trec_measures`' functions.

>>> str(parse("relative_P.5"))
'relative_P_5'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import trec_names
from .trec_measures import FUNCTIONS, UNRANKED_ZERO, Rankings, iprec_at_recall

# How each family takes its parameter, as trec_eval's meas_init.c reads it: none; one cut-off per printed line (a
# rank, or a real number printed with two decimals); or one parameter text printed as given (a list of numbers, or of
# grade=gain pairs).
NO_PARAM = ("gm_map", "gm_bpref", "binG", "num_nonrel_judged_ret")
RANK_CUT = ("relative_P", "unj")
REAL_CUT = ("Rprec_mult",)
LISTS = ("utility", "11pt_avg")
PAIRS = ("G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "rbp", "rbp_resid")
FAMILIES = (*NO_PARAM, *RANK_CUT, *REAL_CUT, *LISTS, *PAIRS)
_LONGEST_FIRST = sorted(FAMILIES, key=len, reverse=True)
_REAL = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")


@dataclass(frozen=True)
class TrecMeasure:
    """One trec_eval measure that gapbench computes itself: its family (trec_eval's name) and parameter. ``str()``
    is the name trec_eval prints (``gm_map``, ``Rprec_mult_0.20``, ``relative_P_5``, ``utility_2,-1,0,0``), which is
    also the name results keep it under.

    >>> str(parse("Rprec_mult.0.2")), str(parse("unj_10")), str(parse("ndcg.1=3,2=9"))
    ('Rprec_mult_0.20', 'unj_10', 'ndcg_1=3,2=9')
    """

    family: str
    cut: float | None = None
    text: str = ""  # the parameter of a LISTS or PAIRS family, as given

    @property
    def NAME(self) -> str:  # noqa: N802 - read where ir-measures' measures are read
        return self.family

    @property
    def params(self) -> dict[str, float]:
        """A rank cut-off as ir-measures names it (``cutoff``): what the run must hold for the measure."""
        return {"cutoff": int(self.cut)} if self.family in RANK_CUT and self.cut is not None else {}

    def __str__(self) -> str:
        if self.family in RANK_CUT:
            return f"{self.family}_{int(self.cut or 0)}"
        if self.family in REAL_CUT:
            return f"{self.family}_{self.cut:.2f}"
        return f"{self.family}_{self.text}" if self.text else self.family

    def compute(self, rankings: Rankings) -> np.ndarray:
        """Every query's value."""
        function = FUNCTIONS[self.family]
        if self.family in RANK_CUT:
            return function(rankings, int(self.cut or 0))
        if self.family in REAL_CUT:
            return function(rankings, self.cut)
        if self.family == "utility":
            return function(rankings, self.numbers()) if self.text else function(rankings)
        if self.family == "11pt_avg":
            return function(rankings, sorted(self.numbers())) if self.text else function(rankings)
        if self.family in PAIRS and self.text:
            gains, p = self._pairs()
            read = rankings.with_gains(gains)
            return function(read, p) if self.family in ("rbp", "rbp_resid") else function(read)
        return function(rankings)

    def numbers(self) -> list[float]:
        return [float(x) for x in self.text.split(",")]

    def _pairs(self) -> tuple[dict[int, float], float]:
        """(grade -> gain, rbp's p) from ``1=3,2=9,p=0.8``: a name that is an integer is a grade (gain_init.c)."""
        gains: dict[int, float] = {}
        p = 0.9
        for pair in self.text.split(","):
            name, _, value = pair.partition("=")
            if name == "p":
                p = float(value)
            elif re.fullmatch(r"[+-]?[0-9]+", name):
                gains[int(name)] = float(value)
        return gains, p


class ParamError(ValueError):
    """A trec_eval parameter that trec_eval would refuse; the message says what is accepted."""


def parse(text: str) -> TrecMeasure | None:
    """The measure trec_eval names ``text`` when gapbench computes it itself (``gm_map``, ``Rprec_mult.0.2``,
    ``relative_P_5``, ``utility.2,-1,0,0``, ``ndcg.1=3,2=9``, ``rbp.p=0.8``), else None. The family is read
    case-insensitively, with ``.`` or ``_`` before the parameter, as gapbench reads trec_eval's other names. A plain
    ``ndcg`` is not one: it is ir-measures' nDCG. Raises :class:`ParamError` for a parameter trec_eval refuses."""
    text = text.strip()
    folded = text.casefold()
    family = param = None
    for name in _LONGEST_FIRST:  # ndcg_rel before ndcg, rbp_resid before rbp
        if folded == name.casefold():
            family = name
            break
        if folded.startswith(name.casefold()) and folded[len(name):len(name) + 1] in ("_", "."):
            family, param = name, text[len(name) + 1:]
            break
    if family is None or (family == "ndcg" and param is None):
        return None
    if family in PAIRS and param is not None and "=" not in param:
        return None  # another family's name (ndcg_cut_10), or no parameter gapbench reads here
    if param is None:
        if family in RANK_CUT or family in REAL_CUT:
            example = f"{family}_10 or {family}.10" if family in RANK_CUT else f"{family}_0.20 or {family}.0.2"
            raise ParamError(f"trec_eval's {family} needs its parameter here, one measure each, for example {example}")
        return TrecMeasure(family)
    if family in NO_PARAM:
        raise ParamError(f"trec_eval's {family} takes no parameter; write it as {family}")
    if family in RANK_CUT:
        whole = trec_names.cut_off(param)  # atol, as trec_eval reads it: relative_P.5.5 is relative_P_5
        if whole is None or whole < 1:
            raise ParamError(f"the cut-off of trec_eval's {family} is a whole number from 1, got {param!r}")
        return TrecMeasure(family, cut=whole)
    if family in REAL_CUT:
        if not _REAL.match(param) or not 0 <= float(param) < 1e6:
            raise ParamError(f"the multiple of R in trec_eval's {family} is a number such as 0.2 or 1.5, got {param!r}")
        return TrecMeasure(family, cut=float(param))
    if family in LISTS:
        numbers = param.split(",")
        if not all(_REAL.match(x) for x in numbers) or (family == "utility" and len(numbers) != 4):
            shape = "four weights, for example utility.1,-1,0,0" if family == "utility" else \
                "recall levels, for example 11pt_avg.0.2,0.5,0.8"
            raise ParamError(f"trec_eval's {family} takes {shape}; got {param!r}")
        return TrecMeasure(family, text=param)
    for pair in param.split(","):
        name, eq, value = pair.partition("=")
        if not eq or not name or not _REAL.match(value) or (name != "p" and not re.fullmatch(r"[+-]?[0-9]+", name)):
            raise ParamError(f"trec_eval's {family} takes grade=gain pairs (and rbp p=persistence), for example "
                             f"{family}.1=1,2=3; got {param!r}")
        if name == "p" and not 0 < float(value) < 1:
            raise ParamError(f"rbp's persistence p is a number between 0 and 1, got {value!r}")
    return TrecMeasure(family, text=param)


def computes(measure: object) -> bool:
    """Whether gapbench computes ``measure`` itself: a :class:`TrecMeasure`, or ir-measures' ``IPrec@x`` with its
    default parameters (trec_eval 10's rule; pytrec_eval embeds the earlier one)."""
    if isinstance(measure, TrecMeasure):
        return True
    params = getattr(measure, "params", None) or {}
    return getattr(measure, "NAME", None) == "IPrec" and params.get("rel", 1) == 1 and not params.get("judged_only")


def values(measures: Iterable[object], qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]],
           query_ids: Sequence[str], *, block: int = 4096) -> dict[str, dict[str, float]]:
    """measure name -> query -> value for every query of ``query_ids`` (one absent from ``ranked`` is scored as
    trec_eval -c scores it), for measures :func:`computes` accepts; ``block`` queries at a time, so memory stays
    bounded (a query's value depends on that query alone)."""
    measures = list(measures)
    out: dict[str, dict[str, float]] = {str(m): {} for m in measures}
    for start in range(0, len(query_ids), block):
        qids = list(query_ids[start:start + block])
        rankings = Rankings.of(qrels, ranked, query_ids=qids)
        unranked = np.array([q not in ranked for q in qids], dtype=bool)
        for measure in measures:
            if isinstance(measure, TrecMeasure):
                found = measure.compute(rankings)
                if measure.family in UNRANKED_ZERO:
                    found = np.where(unranked, 0.0, found)
            else:
                found = iprec_at_recall(rankings, float(measure.params["recall"]))  # type: ignore[attr-defined]
            out[str(measure)].update(zip(qids, found.tolist()))
    return out
