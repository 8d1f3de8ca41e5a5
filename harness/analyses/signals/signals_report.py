"""The report: :func:`analyse` turns a table of signals and the weak labels into a :class:`SignalsReport` (the AUC
table, the pruning, the gate and the gate on either firing); :func:`save_report` writes it as signals.json,
signals.md, signals_per_query.tsv and the two figures. signals.md is rendered by the model's own
:func:`~gapbench.schemas.signals.to_markdown` (re-exported here with its tables)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import ConfigError, GapbenchError
from ...evidence import HELD_OUT_MIN_PER_CLASS, class_shortfall, separation_evidence
from ...files import atomic_writer, output_folder, pyplot, write_figure
from ...schemas.signals import (  # noqa: F401
    GATE_HEADER,
    SIGNAL_HEADER,
    SignalsReport,
    gate_table,
    gate_warning,
    signal_table,
    to_markdown,
)
from .definitions import EXPECTED, SignalTable
from .evidence import gate_warnings, signal_warnings
from .gate import EITHER_MAX_CORR, calibrate_either, calibrate_gate, either_pair, stratified_split
from .signal_stats import bootstrap_auc_ci, select_signals, separation, spearman


def _clean(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def analyse(
    table: SignalTable, labels: npt.ArrayLike, *, task: str = "", bar: float = 0.65, max_corr: float = 0.85,
    n_bootstrap: int = 1000, seed: int = 0, calib_fraction: float = 0.5, target_catch: float | None = None,
    gate_signal: str | None = None, meta: Mapping[str, Any] | None = None, either_max_corr: float = EITHER_MAX_CORR,
) -> SignalsReport:
    """AUC table, Spearman pruning, the calibrated gate and the gate on either of two barely correlated kept signals
    firing (when two kept signals have |Spearman| < ``either_max_corr``) for a table of signals and weak labels.

    ``meta`` (the settings and retrievers signals.json records beside the analysis, see :meth:`SignalsOptions.meta`)
    goes into the report as given; the report keeps ``table`` and the labels for the per-query file and figures."""
    y = np.asarray(labels, dtype=np.int64)
    if y.size != len(table.query_ids):
        raise GapbenchError(f"{y.size} labels for {len(table.query_ids)} queries.")
    sigs: dict[str, dict[str, Any]] = {}
    seps: dict[str, float] = {}
    available: dict[str, np.ndarray] = {}  # the values of the signals the runs could give
    for i, name in enumerate(table.values):
        vals = table.values[name]
        entry: dict[str, Any] = {"available": vals is not None, "reason": table.reasons.get(name, ""),
                                 "expected": EXPECTED.get(name, "lower_is_weaker")}
        if vals is None:
            sigs[name] = {**entry, "kept": False, "dropped": "unavailable"}
            continue
        ok = np.isfinite(vals)
        sep, orient, a = separation(y[ok], vals[ok], entry["expected"])
        ci = bootstrap_auc_ci(y[ok], vals[ok], orient, n_resamples=n_bootstrap, seed=seed + i)
        good, weak = vals[ok & (y == 0)], vals[ok & (y == 1)]
        entry.update({
            "n": int(ok.sum()), "auc": _clean(a), "separation": _clean(sep), "orientation": orient,
            "ci95": [_clean(ci[0]), _clean(ci[1])],
            "mean_good": _clean(float(good.mean())) if good.size else None,
            "mean_weak": _clean(float(weak.mean())) if weak.size else None,
            "n_weak": int(weak.size),
        })
        # the one evidence rule: a separation its queries cannot support is not written as a number (the gate and
        # the choice of kept signals still use it, and say so in their own evidence warnings)
        why = None if entry["separation"] is None else separation_evidence(
            entry["n"], int(weak.size), entry["separation"], entry["ci95"])
        entry["withheld"] = why
        if why is not None:
            entry.update({"auc": None, "separation": None, "ci95": [None, None]})
        sigs[name] = entry
        seps[name] = sep
        available[name] = vals
    corr = {a: {b: _clean(spearman(available[a], available[b])) for b in available if b != a} for a in available}
    corr_f = {a: {b: (math.nan if v is None else v) for b, v in row.items()} for a, row in corr.items()}
    kept, dropped = select_signals(seps, corr_f, bar=bar, max_corr=max_corr)
    for name in seps:
        sigs[name]["kept"] = name in kept
        sigs[name]["dropped"] = dropped.get(name)
    gate: dict[str, Any] | None = None
    gate_note: str | None = None
    if gate_signal is not None and gate_signal not in table.values:
        raise ConfigError(f"gate_signal {gate_signal!r} is not computed; signals: {', '.join(table.values)}.")
    if gate_signal is not None and table.values[gate_signal] is None:
        raise ConfigError(f"gate_signal {gate_signal!r} is unavailable: {table.reasons.get(gate_signal, '')}.")
    if 0 < int(y.sum()) < y.size and seps:
        try:
            gate = _choose_gate(available, y, seps, kept, gate_signal, calib_fraction, seed, target_catch)
        except GapbenchError as exc:
            gate_note = str(exc)
    else:
        gate_note = "every query is weak or every query is good in the window: nothing to separate"
    summary: dict[str, Any] = {
        "n_queries": int(y.size), "n_weak": int(y.sum()), "weak_rate": float(y.mean()) if y.size else None,
        "bar": bar, "max_corr": max_corr, "n_bootstrap": n_bootstrap, "seed": seed,
        "signals": sigs, "spearman": corr, "kept": kept, "gate": gate,
    }
    if gate is not None:
        gate["evidence_warnings"] = gate_warnings(gate)
        _withhold_thin_rates(gate)
    if gate_note:
        summary["gate_note"] = gate_note
    summary["either_max_corr"] = either_max_corr
    gate_either, either_note = _either_gate(available, y, kept, corr, either_max_corr, calib_fraction, seed,
                                            target_catch)
    summary["gate_either"] = gate_either
    if either_note:
        summary["gate_either_note"] = either_note
    if gate_either is not None:
        gate_either["evidence_warnings"] = gate_warnings(gate_either, "the gate on either firing")
        _withhold_thin_rates(gate_either)
    summary["evidence_warnings"] = signal_warnings(int(y.size), int(y.sum()), sigs)
    return SignalsReport.computed({"kind": "signals", "task": task, "version": 1, **(meta or {}), **summary}, table, y)


def _either_gate(
    values: Mapping[str, np.ndarray], y: np.ndarray, kept: Sequence[str],
    corr: Mapping[str, Mapping[str, float | None]], max_corr: float, calib_fraction: float, seed: int,
    target_catch: float | None,
) -> tuple[dict[str, Any] | None, str | None]:
    """The gate on either firing (``values``: the available signals'), or None and why not."""
    pair = either_pair(kept, corr, max_corr)
    if pair is None:
        return None, (f"no two kept signals with |Spearman| < {max_corr} (kept: {', '.join(kept) or 'none'}); the "
                      "article gates on either only for two signals that separate well and barely correlate")
    if not 0 < int(y.sum()) < y.size:
        return None, "every query is weak or every query is good in the window: nothing to separate"
    try:
        g = calibrate_either(y, values[pair[0]], values[pair[1]], pair, calib_fraction=calib_fraction,
                             seed=seed, target_catch=target_catch)
    except GapbenchError as exc:
        return None, str(exc)
    return {**g, "spearman": corr[pair[0]][pair[1]], "max_corr": max_corr}, None


def _choose_gate(
    values: Mapping[str, np.ndarray], y: np.ndarray, seps: Mapping[str, float], kept: Sequence[str],
    gate_signal: str | None, calib_fraction: float, seed: int, target_catch: float | None,
) -> dict[str, Any]:
    """The gate on ``gate_signal`` or, when None, on the kept signal (else any available one) that separates best on
    the calibration split (``values``: the available signals')."""
    cal, _ = stratified_split(y, calib_fraction, seed)
    if gate_signal is None:
        pool = kept or list(seps)
        cal_sep = {}
        for s in pool:
            v = values[s]
            ok = np.isfinite(v[cal])
            sep = separation(y[cal][ok], v[cal][ok])[0]
            cal_sep[s] = -1.0 if math.isnan(sep) else sep
        gate_signal = max(pool, key=lambda s: (cal_sep[s], -pool.index(s)))
    return calibrate_gate(y, values[gate_signal], gate_signal, calib_fraction=calib_fraction, seed=seed,
                          target_catch=target_catch)


def _withhold_thin_rates(gate: dict[str, Any]) -> None:
    """The evidence rule on a gate's splits: catch rate, false-alarm rate, Youden J (and the split's separation) of a
    split with fewer than HELD_OUT_MIN_PER_CLASS weak or good retrievals are not written as numbers; ``withheld``
    says why, with the counts. The gate's rule itself stands: it was calibrated on all of its split's queries."""
    for split in ("calibration", "held_out"):
        rates = gate[split]
        why = class_shortfall(rates["n_weak"], rates["n"], minimum=HELD_OUT_MIN_PER_CLASS)
        if why is not None:  # no key where the rates stand, as in files written before the rule
            rates.update({k: None for k in ("catch_rate", "false_alarm_rate", "youden_j", "separation") if k in rates})
            rates["withheld"] = why


def plot_auc(d: Mapping[str, Any], path: str | Path) -> Path:
    """Separation bars of signals.json's content with their CIs (kept signals in colour) and the bar."""
    plt = pyplot()

    names = [n for n, s in d["signals"].items() if s["available"] and s["separation"] is not None]
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=110)
    if names:
        seps = [d["signals"][n]["separation"] for n in names]
        lo = [max(0.0, s - (d["signals"][n]["ci95"][0] or s)) for n, s in zip(names, seps)]
        hi = [max(0.0, (d["signals"][n]["ci95"][1] or s) - s) for n, s in zip(names, seps)]
        colors = ["C0" if d["signals"][n]["kept"] else "C7" for n in names]
        ax.bar(range(len(names)), seps, yerr=[lo, hi], color=colors, capsize=4)
        marks = {"lower_is_weaker": "low = weak", "higher_is_weaker": "high = weak"}
        ax.set_xticks(range(len(names)), [f"{n.replace('_', chr(10))}\n({marks[d['signals'][n]['orientation']]})"
                                          for n in names], fontsize=8)
    ax.axhline(d["bar"], color="C3", ls="--", lw=1, label=f"bar {d['bar']}")
    ax.axhline(0.5, color="k", lw=0.6, alpha=0.5)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("separation = max(AUC, 1-AUC)")
    ax.set_title(f"{d.get('task', '')}: weak-retrieval signals (k={d.get('window')})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return write_figure(fig, path)


def plot_gate(report: SignalsReport, path: str | Path) -> Path | None:
    """Histogram of the gate's signal for good and weak retrievals with the threshold; None without a gate or
    without the per-query values (a report read back from signals.json)."""
    g = report.gate
    if g is None or report.table is None:
        return None
    plt = pyplot()

    v = np.asarray(report.table.values[g.signal], dtype=np.float64)
    y = report.labels
    ok = np.isfinite(v)
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=110)
    bins = np.histogram_bin_edges(v[ok], bins=30)
    ax.hist(v[ok & (y == 0)], bins=bins, alpha=0.6, color="C2", label=f"good ({int((ok & (y == 0)).sum())})")
    ax.hist(v[ok & (y == 1)], bins=bins, alpha=0.6, color="C3", label=f"weak ({int((ok & (y == 1)).sum())})")
    t = g.threshold
    ax.axvline(t, color="k", ls="--", label=f"threshold {t:.4g}")
    lo, hi = ax.get_xlim()
    if g.orientation == "lower_is_weaker":
        ax.axvspan(lo, t, color="0.5", alpha=0.12, label="escalate")
    else:
        ax.axvspan(t, hi, color="0.5", alpha=0.12, label="escalate")
    ax.set_xlim(lo, hi)
    ax.set_xlabel(g.signal)
    ax.set_ylabel("queries")
    ax.set_title(f"{report.task}: gate on {g.signal} ({g.rule})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return write_figure(fig, path)


def save_report(report: SignalsReport, out_dir: str | Path) -> dict[str, Path]:
    """Write signals.json, signals.md, signals_per_query.tsv and the PNGs into ``out_dir``; a report read back from
    signals.json has no per-query values, so only signals.json, signals.md and signals_auc.png are written for it."""
    out = output_folder(out_dir)
    d = report.model_dump(mode="json", exclude_unset=True)  # keys absent from a file read back stay absent
    paths = {"json": out / "signals.json", "md": out / "signals.md"}
    with atomic_writer(paths["json"]) as fh:
        json.dump(d, fh, indent=2)
    with atomic_writer(paths["md"]) as fh:
        fh.write(to_markdown(d))
    table = report.table
    if table is not None:
        paths["tsv"] = out / "signals_per_query.tsv"
        names = list(table.values)
        with atomic_writer(paths["tsv"]) as fh:
            fh.write("\t".join(["query_id", "weak", *names]) + "\n")
            for i, q in enumerate(table.query_ids):
                vals = [repr(float(table.values[n][i])) if table.values[n] is not None else "nan" for n in names]
                fh.write("\t".join([q, str(int(report.labels[i])), *vals]) + "\n")
    paths["auc_png"] = plot_auc(d, out / "signals_auc.png")
    gate_png = plot_gate(report, out / "signals_gate.png")
    if gate_png:
        paths["gate_png"] = gate_png
    return paths
