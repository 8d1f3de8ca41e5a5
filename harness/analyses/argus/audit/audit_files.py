"""The audit's files: ``argus_audit.json`` (the :class:`~gapbench.schemas.ArgusAudit` report), ``argus_audit.md``,
``argus_lda.png`` (an LDA of entity embeddings by RPS tercile) and ``argus_embeddings.npz``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ....files import atomic_writer, output_folder, write_figure, write_text_atomic
from ....schemas.argus import ArgusAudit
from ....tables import Table
from .rps import terciles


def write_json(path: Path, obj: dict) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2) + "\n")


def lda_projection(emb: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, tuple[str, str]]:
    """2-D projection: LDA on tercile labels; with one discriminant axis the second is the residual's first PC."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    classes = np.unique(labels)
    n_comp = min(2, emb.shape[1], len(classes) - 1)
    if n_comp < 1:
        centred = emb - emb.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        return centred @ vt[:2].T, ("PC 1", "PC 2")
    lda = LinearDiscriminantAnalysis(n_components=n_comp, solver="svd")
    z = lda.fit(emb, labels).transform(emb)
    if n_comp == 2:
        return z[:, :2], ("LD 1", "LD 2")
    w = lda.scalings_[:, 0] / np.linalg.norm(lda.scalings_[:, 0])
    res = emb - (emb @ w)[:, None] * w[None, :]
    res = res - res.mean(axis=0)
    _, _, vt = np.linalg.svd(res, full_matrices=False)
    return np.column_stack([z[:, 0], res @ vt[0]]), ("LD 1", "residual PC 1")


def plot_lda(result: ArgusAudit, path: Path) -> None:
    """The LDA figure of an audit report holding its embeddings (as :func:`~.retrievability.audit` returns it)."""
    from ....files import pyplot

    plt = pyplot()
    targets, emb = result.target_embeddings()
    rps = result.rps()
    scores = np.array([rps[q] for q in targets])
    terc, cuts = terciles(scores)
    z, (xl, yl) = lda_projection(emb, terc)
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    colours = {0: "#d62728", 1: "#7f7f7f", 2: "#1f77b4"}
    names = {0: f"low (RPS < {cuts[0]:.2f})", 1: "mid", 2: f"high (RPS >= {cuts[1]:.2f})"}
    for c in (0, 1, 2):
        sel = terc == c
        if sel.any():
            ax.scatter(z[sel, 0], z[sel, 1], s=16, alpha=0.75, c=colours[c], label=f"{names[c]} n={int(sel.sum())}")
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title(f"ARGUS audit: LDA of entity embeddings by RPS tercile\n{result.retriever}, "
                 f"k={result.k}, N={result.n_requested}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path, dpi=120)


def summary_table(d: Mapping[str, Any]) -> Table:
    """The audit's headline numbers, one measure a row."""
    cuts, bands = d["terciles"]["cutoffs"], d["bands"]
    rows = [["targets / queries (pairs)", f"{d['n_targets']} / {d['n_pairs']}"],
            ["mean RPS", f"{d['mean_rps']:.4f}"],
            ["chance (mean k/N_eff)", f"{d['chance']:.4f}"],
            ["fraction RPS > 0.5", f"{d['frac_rps_gt_0_5']:.4f}"],
            ["tercile cut-offs", f"{cuts[0]:.3f}, {cuts[1]:.3f}"],
            ["bands low/mid/high", f"{bands['low']} / {bands['mid']} / {bands['high']}"]]
    return Table(["measure", "value"], rows, align="ll")


def blind_spot_table(d: Mapping[str, Any], n: int = 10) -> Table:
    """The ``n`` entities with the lowest RPS (ties by qid)."""
    rows = [[e["qid"], e["label"] or "", f"{e['rps']:.3f}", f"{e['hits']}/{e['n_queries']}"]
            for e in sorted(d["entities"], key=lambda e: (e["rps"], e["qid"]))[:n]]
    return Table(["qid", "label", "RPS", "hits/queries"], rows, align="llll")


def audit_markdown(d: dict) -> str:
    ne = d["n_effective"]
    lines = [
        f"# ARGUS retrievability audit: {d['task']}",
        "",
        f"Retriever `{d['retriever']}` ({d['encoder']['pooling']} pooling, dim {d['encoder']['dim']}), "
        f"k={d['k']}, N={d['n_requested']} requested (effective {ne['min']}-{ne['max']}, median {ne['median']:g}), "
        f"seed {d['seed']}, hit = {d['hit_rule']}, relations {d['relations']}.",
        "",
        summary_table(d).markdown(),
        "",
    ]
    lines += [f"> warning: {w}" for w in d["warnings"]] + ([""] if d["warnings"] else [])
    lines += ["Lowest-RPS entities (blind spots):", "", blind_spot_table(d).markdown(), ""]
    return "\n".join(lines)


def write_audit(result: ArgusAudit, out: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """Write argus_audit.json/.md, argus_lda.png and argus_embeddings.npz into ``out``; returns their paths."""
    out = output_folder(out)
    d = result.model_dump(mode="json")
    paths = {"json": out / "argus_audit.json", "md": out / "argus_audit.md", "embeddings": out / "argus_embeddings.npz"}
    write_json(paths["json"], d)
    write_text_atomic(paths["md"], audit_markdown(d))
    with atomic_writer(paths["embeddings"], binary=True) as fh:
        np.savez(fh, qids=np.array(result.qids), embeddings=result.embeddings,
                 fingerprint=np.array(result.encoder.fingerprint))
    if plot:
        paths["lda"] = out / "argus_lda.png"
        plot_lda(result, paths["lda"])
    return paths
