"""Warnings for thin evidence: a separation or a gate that the queries behind it cannot support.

A separation of .952 computed from one good query among 43, or an interval as wide as the distance from chance, reads
like a finding but is not one. The same goes for a gate whose held-out Youden J is near zero: on queries it was not
calibrated on, it escalates weak and good retrievals at about the same rate. :func:`signal_warnings` and
:func:`gate_warnings` put such cases into words; ``analyse`` stores them in signals.json (``evidence_warnings`` of the
report and of each gate), the CLI prints them, and signals.md shows them.

>>> signal_warnings(43, 42, {})[0].startswith("only 1 good retrieval among 43 queries (42 weak)")
True
>>> gate_warnings({"held_out": {"n": 40, "n_weak": 20, "youden_j": 0.065, "catch_rate": 0.5,
...                             "false_alarm_rate": 0.435}})[0].startswith("the held-out Youden J of the gate is 0.065")
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# the thresholds are the one rule of gapbench.evidence, which the board and compare follow too
from ...evidence import CHANCE, HELD_OUT_MIN_PER_CLASS, J_NEAR_ZERO, MIN_PER_CLASS, reaches_chance, too_few
from ...tables import plural


def signal_warnings(n_queries: int, n_weak: int, signals: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Warnings on the evidence behind the separations: few weak or few good retrievals, and each available signal
    whose 95% interval is at least as wide as its distance from chance (separation - 0.5)."""
    out = []
    n_good = n_queries - n_weak
    for few, many, word, other in ((n_good, n_weak, "good", "weak"), (n_weak, n_good, "weak", "good")):
        # an empty class has no separation at all: the analysis says so where it leaves the gate out
        if few and too_few(few):
            out.append(f"only {plural(few, word + ' retrieval')} among {n_queries} queries ({many} {other}): every "
                       f"separation and interval rests on {'that query' if few == 1 else 'those queries'}; at least "
                       f"{MIN_PER_CLASS} of each are needed before a separation means much (more queries, or another "
                       "window).")
    for name, s in signals.items():
        sep, ci = s.get("separation"), s.get("ci95") or [None, None]
        withheld = s.get("withheld")
        if s.get("available") and withheld and not withheld.startswith("too few"):  # the few-class case is said above
            out.append(f"{name}: its separation is not shown as a number: {withheld}; these queries cannot tell it "
                       "from chance.")
            continue
        if not s.get("available") or sep is None or ci[0] is None or ci[1] is None:
            continue
        if reaches_chance(sep, ci[0], ci[1]):
            out.append(f"{name}: its 95% interval {ci[0]:.3f}-{ci[1]:.3f} is as wide as its effect (separation "
                       f"{sep:.3f}, {sep - CHANCE:.3f} above chance {CHANCE}): these queries cannot tell it from "
                       "chance.")
    return out


def gate_warnings(gate: Mapping[str, Any], name: str = "the gate") -> list[str]:
    """Warnings on a gate's held-out split: few weak or good retrievals there, or a Youden J near zero."""
    h = gate["held_out"]
    n_weak, n_good = h["n_weak"], h["n"] - h["n_weak"]
    if too_few(min(n_weak, n_good), HELD_OUT_MIN_PER_CLASS):
        return [(f"the held-out split of {name} has {plural(n_weak, 'weak retrieval')} and {n_good} good: its "
                 f"catch and false-alarm rates rest on too few queries to judge it (at least {HELD_OUT_MIN_PER_CLASS} "
                 "of each are needed).")]
    j = h.get("youden_j")
    if j is not None and j < J_NEAR_ZERO:
        return [(f"the held-out Youden J of {name} is {j:.3f} (catch rate {h['catch_rate']:.3f} - false-alarm rate "
                 f"{h['false_alarm_rate']:.3f}), near chance (0): on queries it was not calibrated on, it escalates "
                 "weak and good retrievals at almost the same rate.")]
    return []
