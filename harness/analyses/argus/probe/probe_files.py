"""The probe's files: ``argus_probe.json`` (:class:`gapbench.schemas.ArgusProbe`), ``argus_probe.md`` and
``argus_probe_calibration.png`` (Figure 7). The renderers read the report as JSON data, so files written by earlier
versions (without the classification views or calibration) render too."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ....files import output_folder, write_text_atomic
from ....schemas.base import Model
from ....tables import Table
from ..audit.audit_files import write_json
from .probe_metrics import CLASS_KEYS


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3f}"


PROBE_HEADER = ["probe (test)", "RMSE", "MAE", "Pearson", "Spearman", "band acc.", "band macro-F1"]
CLASS_HEADER = ["accuracy", "macro P", "macro R", "macro F1", "weighted P", "weighted R", "weighted F1"]
VIEWS = {"bands": "Three RPS bands (low [0, .33), mid [.33, .66), high [.66, 1]), as Tables 1 and 3",
         "blind_spot": "Blind spot or not (RPS < tau, tau = {tau}), the flagging rule of section 4.1"}


def _named_metrics(ds: dict) -> list[tuple[str, dict]]:
    named = [(f"{f} (val RMSE {v['validation_rmse']:.3f})", v["test"]) for f, v in ds["families"].items()]
    return named + [(b.replace("_", " "), m) for b, m in ds["baselines"].items()]


def probe_table(ds: dict) -> Table:
    """Test metrics of each probe family (named with its validation RMSE) and of each baseline."""
    rows = [[name, f"{m['rmse']:.3f}", f"{m['mae']:.3f}", _fmt(m["pearson"]), _fmt(m["spearman"]),
             f"{m['band_accuracy']:.3f}", f"{m['band_macro_f1']:.3f}"] for name, m in _named_metrics(ds)]
    return Table(PROBE_HEADER, rows, align="lllllll")


def classification_table(ds: dict, view: str) -> Table:
    """One classification view (``bands`` or ``blind_spot``) of each probe family and baseline on test."""
    rows = [[name] + [f"{m[view][k]:.3f}" for k in CLASS_KEYS] for name, m in _named_metrics(ds)]
    return Table(["probe (test)"] + CLASS_HEADER, rows, align="l" * 8)


def _protocol_line(ds: dict) -> str:
    pr = ds["protocol"]
    split = "/".join(f"{100 * v:g}" for v in pr["split"])
    rebal = (f"training split oversampled over {pr['rebalance_bins']} RPS bins to {pr['n_train_rows']} rows"
             if pr["rebalance_bins"] else "no rebalancing")
    return f"Protocol: split {split} (train/validation/test), {rebal}, {pr['grids']} grids, tau {pr['tau']:g}."


def _dataset_extras(ds: dict) -> list[str]:
    """The sections a report written before the classification views and calibration did not have."""
    lines = [_protocol_line(ds), ""] if "protocol" in ds else []
    first = ds["test"] if "test" in ds else {}
    for view, title in VIEWS.items():
        if view in first:
            lines += [title.format(tau=first[view].get("tau")) + ":", "", classification_table(ds, view).markdown(), ""]
    if "calibration" in ds:
        r = ds["calibration"]["residuals"]
        lines += [f"Calibration of the selected probe on test (Figure 7, argus_probe_calibration.png): residual "
                  f"(empirical - predicted) mean {r['mean']:.3f}, median {r['median']:.3f}, std {r['std']:.3f}.", ""]
    return lines


def probe_markdown(report: dict) -> str:
    lines = [f"# ARGUS blind-spot probes: {report.get('task', '')}", ""]
    for ds in report["datasets"]:
        s = ds["split"]
        lines += [
            f"## {ds['name']}: {ds['n']} labelled entities (train {s['train']} / validation {s['validation']} / "
            f"test {s['test']}), mean RPS {ds['rps_mean']:.3f}",
            "",
            f"Selected on validation RMSE: **{ds['selected']['family']}** {ds['selected']['params']} "
            f"(validation RMSE {ds['selected']['validation_rmse']:.3f}).",
            "",
            probe_table(ds).markdown(),
            "",
            *_dataset_extras(ds),
        ]
        if s["test"] < 50:
            lines += [f"> With {s['test']} test entities these figures are noisy; read them as a sanity "
                      "check, not as a reproduction of the paper's Table 1 (tens of thousands of entities).", ""]
    lines += ["Family and hyper-parameters are selected on validation RMSE; the authors' code selected on test.", ""]
    return "\n".join(lines)


def max_rps_table(deltas: Mapping[str, Mapping[str, Any]]) -> Table:
    """Table 4's cells, one row per name (e.g. a task): retrieved / unretrieved mean max RPS (delta), times 100."""
    def cell(d: Mapping[str, Any]) -> str:
        r, u = d["retrieved"]["mean_max_rps"], d["unretrieved"]["mean_max_rps"]
        if d["delta"] is None:
            return "n/a"
        return f"{100 * r:.2f}/{100 * u:.2f} ({100 * d['delta']:+.2f})"

    rows = [[name, str(d["k"]), str(d["retrieved"]["n"]), str(d["unretrieved"]["n"]), cell(d)]
            for name, d in deltas.items()]
    return Table(["", "k", "retrieved", "unretrieved", "max RPS x100: retrieved/unretrieved (delta)"], rows,
                 align="lrrrl")


def calibration_figure(report: dict):
    """Figure 7 for each labelled set: top, the joint density of predicted vs empirical RPS with the binned mean
    empirical RPS per predicted bin and the diagonal; bottom, the residual histogram."""
    from ....files import pyplot

    plt = pyplot()
    sets = [ds for ds in report["datasets"] if "calibration" in ds]
    fig, axes = plt.subplots(2, len(sets), figsize=(4.2 * len(sets), 7.5), squeeze=False)
    for col, ds in enumerate(sets):
        cal = ds["calibration"]
        top, bottom = axes[0][col], axes[1][col]
        top.imshow(np.asarray(cal["density"]), origin="lower", extent=(0, 1, 0, 1), cmap="Blues", aspect="equal")
        pts = [(b["mean_predicted"], b["mean_empirical"]) for b in cal["binned"] if b["n"]]
        top.plot(*zip(*pts), "o-", color="tab:red", label="mean empirical per predicted bin")
        top.plot([0, 1], [0, 1], "--", color="grey", label="diagonal")
        top.set(xlabel="predicted RPS", ylabel="empirical RPS", title=f"{ds['name'].split(' ')[0]} "
                f"({ds['selected']['family']}, test n={ds['split']['test']})")
        top.legend(fontsize=7, loc="upper left")
        hist = cal["residuals"]["hist"]
        edges = np.linspace(-1, 1, len(hist) + 1)
        bottom.bar(edges[:-1], hist, width=np.diff(edges), align="edge", color="tab:blue", edgecolor="white")
        bottom.axvline(0, color="grey", linestyle="--")
        bottom.set(xlabel="residual (empirical - predicted)", ylabel="test entities")
    fig.tight_layout()
    return fig


def write_probe_report(report: Model | dict, out: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """``argus_probe.json``, ``argus_probe.md`` and (when a labelled set has calibration data and ``plot``)
    ``argus_probe_calibration.png`` in ``out``, from the report (:class:`gapbench.schemas.ArgusProbe`, or its JSON
    data)."""
    from ....files import write_figure

    if isinstance(report, Model):
        report = report.model_dump(mode="json")
    out = output_folder(out)
    paths = {"json": out / "argus_probe.json", "md": out / "argus_probe.md"}
    write_json(paths["json"], report)
    write_text_atomic(paths["md"], probe_markdown(report))
    if plot and any("calibration" in ds for ds in report.get("datasets", ())):
        paths["png"] = write_figure(calibration_figure(report), out / "argus_probe_calibration.png", dpi=110)
    return paths
