"""signals.json: weak-retrieval signals, their separation and the gate calibrated on them.

:class:`SignalsReport` is the one model of the analysis' result: what ``gapbench.signals`` returns, the content of
``signals.json`` (``report.model_dump(mode="json", exclude_unset=True)``: keys absent from a file stay absent) and
``docs/schemas/signals.schema.json``. A report computed in this session also holds the per-query values it was
computed from (``report.table``, ``report.labels``); one read back from a file does not. ``str(report)`` is
signals.md, rendered by :func:`to_markdown` (which also renders a signals.json read as a plain dict).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PrivateAttr

from ..tables import Table
from .base import Model, Number, One

Orientation = Literal["lower_is_weaker", "higher_is_weaker"]
Method = Literal["youden", "catch_rate"]


def _ordered(pair: list[float | None]) -> list[float | None]:
    if pair[0] is not None and pair[1] is not None and pair[0] > pair[1]:
        raise ValueError("its low end is above its high end (an interval is [low, high])")
    return pair


# a bootstrap interval [low, high]; an end that cannot be computed (one class only) is null
Interval = Annotated[list[Number | None], Field(min_length=2, max_length=2), AfterValidator(_ordered)]
Two = Field(min_length=2, max_length=2)


class CalibratedRetriever(Model):
    """A retriever the signals were computed from: its spec and kind; since the gate checks the runs it reads, also
    its name, adapter fingerprint and config as a run manifest records them (a config too long is left out)."""

    spec: str
    kind: Literal["dense", "sparse", "other"]
    name: str | None = None
    fingerprint: str | None = None
    config: dict[str, Any] | None = None  # the adapter's own settings: their keys differ by adapter


class AvailableSignal(Model):
    """A signal the runs could give: its separation of weak from good retrievals and whether it was kept."""

    available: Literal[True]
    reason: str  # what it was read from
    expected: Orientation
    n: int  # queries with a finite value
    auc: Number | None  # P(weak value > good value); null with one class only
    separation: Number | None  # max(AUC, 1 - AUC)
    orientation: Orientation
    ci95: Interval
    mean_good: Number | None
    mean_weak: Number | None
    kept: bool
    dropped: str | None  # why it was not kept
    # the evidence rule (gapbench.evidence): why auc, separation and ci95 are null although computed (too few weak or
    # good retrievals among the n, or an interval as wide as the distance from chance); null when they are shown
    withheld: str | None = None
    n_weak: int | None = None  # weak retrievals among the n (null in files written before the evidence rule)


class UnavailableSignal(Model):
    """A signal whose ingredient is missing (one dense retriever only, no sparse one, spaCy not installed)."""

    available: Literal[False]
    reason: str
    expected: Orientation
    kept: Literal[False]
    dropped: str


Signal = Annotated[AvailableSignal | UnavailableSignal, Field(discriminator="available")]


class EscalationRates(Model):
    """What a gate escalates on one split of the queries; a rate that cannot be computed (one class only) is null."""

    n: int
    n_weak: int
    catch_rate: Number | None  # recall of weak retrievals
    false_alarm_rate: Number | None  # share of good retrievals escalated
    escalated_share: Number | None
    youden_j: Number | None
    # the evidence rule (gapbench.evidence): why catch_rate, false_alarm_rate and youden_j are null although
    # computable (fewer than 5 weak or 5 good retrievals on the split); null when they are shown
    withheld: str | None = None


class GateSplit(EscalationRates):
    separation: Number | None  # the gate signal's oriented AUC on the split


class Gate(Model):
    """The gate on one signal: escalate when the oriented value is below ``floor`` (``rule`` in raw units)."""

    signal: str
    orientation: Orientation
    method: Method
    target_catch: Number | None
    floor: Number  # oriented units (lower is weaker)
    threshold: Number  # raw units
    rule: str
    calib_fraction: Number
    seed: int
    calibration: GateSplit
    held_out: GateSplit
    # why the held-out split cannot support the gate (few weak or good queries, Youden J near 0); absent in files
    # written before these warnings, [] when there is nothing to say
    evidence_warnings: list[str] | None = None


class EitherGate(Model):
    """The gate on either of two barely correlated kept signals firing, its two floors chosen jointly."""

    signals: Annotated[list[str], Two]
    orientations: Annotated[list[Orientation], Two]
    method: Method
    target_catch: Number | None
    floors: Annotated[list[Number], Two]  # oriented units
    thresholds: Annotated[list[Number], Two]  # raw units
    rule: str
    calib_fraction: Number
    seed: int
    spearman: Number  # of the two signals over all queries
    max_corr: Number  # the bound it is below
    calibration: EscalationRates
    held_out: EscalationRates
    evidence_warnings: list[str] | None = None  # as the single gate's


class SignalsReport(Model):
    """``signals.json``: weak-retrieval signals, their separation and the calibrated gate."""

    kind: Literal["signals"]
    task: str
    version: One
    # written by `gapbench signals` (absent when ``analyse`` is called without them)
    retrievers: list[CalibratedRetriever] | None = None
    task_key: str | None = None  # a local task's content key (gapbench.identity), which the gate compares
    primary: str | None = None
    window: int | None = None
    min_rel: int | None = None
    term_rule: str | None = None
    calib_fraction: Number | None = None
    n_queries: int
    n_weak: int
    weak_rate: Number | None
    bar: Number
    max_corr: Number
    n_bootstrap: int
    seed: int
    signals: dict[str, Signal]
    spearman: dict[str, dict[str, Number | None]]
    kept: list[str]
    gate: Gate | None
    gate_note: str | None = None
    # the gate on either of two barely correlated kept signals firing (absent in files written before it)
    either_max_corr: Number | None = None
    gate_either: EitherGate | None = None
    gate_either_note: str | None = None
    # why the queries cannot support the separations (few weak or good retrievals, an interval as wide as the effect);
    # absent in files written before these warnings, [] when there is nothing to say
    evidence_warnings: list[str] | None = None

    # the per-query values the report was computed from (a gapbench.analyses.signals.SignalTable and the 0/1 weak
    # labels); not part of the file, so None for a report read back from signals.json
    _table: Any = PrivateAttr(default=None)
    _labels: Any = PrivateAttr(default=None)

    @classmethod
    def computed(cls, content: Mapping[str, Any], table: Any, labels: Any) -> SignalsReport:
        """The report of ``content`` (signals.json's keys) with the per-query ``table`` and ``labels`` beside it."""
        report = cls.model_validate(dict(content))
        report._table, report._labels = table, labels
        return report

    @property
    def table(self) -> Any:
        """The per-query signal values (``SignalTable``), or None for a report read from a file."""
        return self._table

    @property
    def labels(self) -> Any:
        """The per-query weak labels (0/1 array in ``table.query_ids`` order), or None for a report read from a file."""
        return self._labels

    def __eq__(self, other: object) -> bool:  # the content: per-query arrays do not compare as one truth value
        return isinstance(other, SignalsReport) and \
            self.model_dump(mode="json", exclude_unset=True) == other.model_dump(mode="json", exclude_unset=True)

    __hash__ = None  # type: ignore[assignment]

    def __str__(self) -> str:
        return to_markdown(self.model_dump(mode="json", exclude_unset=True))


# ---------------------------------------------------------------- signals.md


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


SIGNAL_HEADER = ["signal", "separation", "95% CI", "orientation", "mean good", "mean weak", "kept"]
GATE_HEADER = ["split", "queries", "weak", "catch rate", "false-alarm rate", "escalated"]


def _signal_row(name: str, s: Mapping[str, Any]) -> list[str]:
    if not s["available"]:
        return [name, "unavailable", "", "", "", "", s["reason"]]
    if s.get("withheld"):  # too thin to be shown as a number: the reason stands in the separation's place
        return [name, f"withheld: {s['withheld']}", "", s["orientation"], _fmt(s["mean_good"], 4),
                _fmt(s["mean_weak"], 4), "yes" if s["kept"] else "no: " + str(s["dropped"])]
    ci = s["ci95"]
    return [name, _fmt(s["separation"]), f"{_fmt(ci[0])}-{_fmt(ci[1])}", s["orientation"], _fmt(s["mean_good"], 4),
            _fmt(s["mean_weak"], 4), "yes" if s["kept"] else "no: " + str(s["dropped"])]


def signal_table(d: Mapping[str, Any]) -> Table:
    """One row per signal: separation, its CI, orientation, the two means and whether it was kept."""
    # every column left-aligned (``---``), as signals.md has always been written
    return Table(SIGNAL_HEADER, [_signal_row(name, s) for name, s in d["signals"].items()], align="lllllll")


def gate_table(g: Mapping[str, Any]) -> Table:
    """The gate's catch and false-alarm rates on the calibration and held-out splits."""
    rows = [[split, str(g[split]["n"]), str(g[split]["n_weak"]),
             *([f"withheld: {g[split]['withheld']}", ""] if g[split].get("withheld")
               else [_fmt(g[split]["catch_rate"]), _fmt(g[split]["false_alarm_rate"])]),
             _fmt(g[split]["escalated_share"])]
            for split in ("calibration", "held_out")]
    return Table(GATE_HEADER, rows, align="llllll")


def _gate_lines(d: Mapping[str, Any]) -> list[str]:
    g = d.get("gate")
    if not g:
        return [f"No gate: {d.get('gate_note', '')}"]
    warning = gate_warning(d)
    thin = [f"**Thin evidence:** {w}" for w in g.get("evidence_warnings") or []]
    return [f"Gate ({g['method']}{'' if g['target_catch'] is None else ' ' + str(g['target_catch'])}, "
            f"calibration share {g['calib_fraction']}, seed {g['seed']}): escalate when `{g['rule']}`.",
            *(["", f"**Warning:** {warning}"] if warning else []), *[x for w in thin for x in ("", w)], "",
            gate_table(g).markdown()]


def gate_warning(d: Mapping[str, Any]) -> str | None:
    """Why the gate of a signals.json deserves little trust, when its signal is not a kept one (below the bar or
    pruned): the gate is then the best of weak signals, or the one asked for, not a signal that separates."""
    g = d.get("gate")
    if not g or "signal" not in g or g["signal"] in d.get("kept", ()):
        return None
    sig = d["signals"].get(g["signal"], {})
    sep = sig.get("separation")
    why = sig.get("dropped") or (f"separation {sep:.3f} < bar {d['bar']}" if sep is not None else "not kept")
    h = g["held_out"]
    rates = (f"held-out rates withheld: {h['withheld']}" if h.get("withheld") else
             f"held-out catch rate {_fmt(h['catch_rate'], 3)} against false-alarm rate "
             f"{_fmt(h['false_alarm_rate'], 3)}")
    return (f"the gate's signal {g['signal']} is not a kept signal ({why}), so the gate separates weak from good "
            f"retrievals little: {rates}.")


def _either_lines(d: Mapping[str, Any]) -> list[str]:
    if "gate_either" not in d:  # a signals.json written before the either gate
        return []
    g = d["gate_either"]
    if not g:
        return ["", f"No gate on either firing: {d.get('gate_either_note', '')}"]
    a, b = g["signals"]
    return ["", f"Gate on either firing ({a} and {b}: |Spearman| {abs(g['spearman']):.3f} < {g['max_corr']}; floors "
            f"chosen jointly on the calibration split, {g['method']}"
            f"{'' if g['target_catch'] is None else ' ' + str(g['target_catch'])}): escalate when `{g['rule']}`.",
            *[x for w in g.get("evidence_warnings") or [] for x in ("", f"**Thin evidence:** {w}")], "",
            gate_table(g).markdown()]


def to_markdown(d: Mapping[str, Any]) -> str:
    """signals.md from signals.json's content: the AUC table, the gate and the gate on either firing."""
    lines = [f"# Weak-retrieval signals: {d.get('task', '')}", ""]
    rs = ", ".join(f"`{r['spec']}` ({r['kind']})" for r in d.get("retrievers") or [])
    if rs:
        lines.append(f"Retrievers: {rs}; primary `{d.get('primary')}`; window k={d.get('window')}.")
    lines.append(
        f"{d['n_queries']} queries, {d['n_weak']} weak ({_fmt(d['weak_rate'] and 100 * d['weak_rate'], 1)}%): a "
        "retrieval is weak when a relevant document is missing from the window."
    )
    lines += ["", f"Separation = max(AUC, 1-AUC), 95% bootstrap CI ({d['n_bootstrap']} resamples, seed {d['seed']}); "
              f"bar {d['bar']}, pruning at |Spearman| > {d['max_corr']}.", "", signal_table(d).markdown(), ""]
    lines += [x for w in d.get("evidence_warnings") or [] for x in (f"**Thin evidence:** {w}", "")]
    return "\n".join(lines + _gate_lines(d) + _either_lines(d)) + "\n"
