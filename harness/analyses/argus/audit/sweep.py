"""ARGUS RPS sweeps over the pool size ``N`` and the budget ``k``, with the paper's figures in one call.

For each retriever the entities are encoded once (the audit's encoders, :func:`~.encoders.embed_entities`), ranks are
computed once per ``N`` (:func:`~.rps.compute_ranks`, the same seeded neutrals as ``argus audit --n N --seed S``,
or the dataset's stored candidates) and RPS per ``k`` comes from those ranks (:func:`~.rps.rps_from_ranks`), so
every ``(N, k)`` cell equals ``audit(data, retriever, k=k, n=N, seed=seed)``::

    result = sweep(load_shipped(), ["dense"], ns=[100, 200, 400, 800], ks=[1, 5, 10, 20, 50, 100])
    write_sweep(result, "out/")

Figures (paper section 3.2 and appendix B): ``sweep_vs_n.png`` (Figures 1 and 3: fraction of entities with
RPS > 0.5 and in the fixed low/mid/high bands vs ``N`` at ``k = fig_k``, with the chance level k/N),
``sweep_vs_k.png`` (Figure 5: the same vs ``k`` at the largest ``N``) and ``sweep_lda.png`` (Figures 2 and 6: LDA of
entity embeddings coloured by RPS tercile at ``k = fig_k``, one row per retriever, one column per ``N``).
Deviation: the paper's pools hold N = 800 neutrals drawn from millions of entities; a small dataset caps the
effective N (reported per cell as ``n_effective_min``), so cells above that cap repeat the same ranks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np

from ....errors import ConfigError
from ....files import output_folder, pyplot, write_figure, write_text_atomic
from ....schemas.argus import ArgusSweep, AuditEncoder, BandName, SweepCell, SweepEntity, SweepRetriever
from ....tables import Table
from ..argus_options import ArgusSweepOptions
from .audit_files import lda_projection, write_json
from .encoders import embed_entities
from .inputs import AuditData
from .rps import band_of, chance_level, compute_ranks, rps_from_ranks, terciles

KIND: Final = "argus_sweep"
BAND_NAMES: tuple[BandName, ...] = ("low", "mid", "high")


# ---------------------------------------------------------------- computing
def band_fractions(scores: Sequence[float]) -> dict[str, float]:
    """Fractions of entities in the fixed RPS bands [0, .33), [.33, .66), [.66, 1] and with RPS > 0.5."""
    s = np.asarray(scores, dtype=float)
    bands = band_of(s)
    out: dict[str, float] = {name: float((bands == i).mean()) for i, name in enumerate(BAND_NAMES)}
    out["gt_0_5"] = float((s > 0.5).mean())
    return out


@dataclass(frozen=True)
class RetrieverSweep:
    """One retriever's sweep in memory: its RPS per (N, k) and target, pool sizes per N, and the entity embeddings
    (what the LDA figure projects)."""

    retriever: str
    encoder: dict
    qids: list[str]
    embeddings: np.ndarray
    rps: dict[tuple[int, int], dict[str, float]]  # (N, k) -> target -> RPS
    sizes: dict[int, dict[str, list[int]]]  # N -> target -> candidate-set sizes


def sweep_one(data: AuditData, retriever: Any, ns: list[int], ks: list[int], seed: int, pooling: str) -> RetrieverSweep:
    enc = embed_entities(data, retriever, pooling)
    rps: dict[tuple[int, int], dict[str, float]] = {}
    sizes: dict[int, dict[str, list[int]]] = {}
    for n in ns:
        ranks, sizes[n] = compute_ranks(enc.embeddings, enc.index, data, n, seed)
        for k in ks:
            rps[(n, k)] = {x: rps_from_ranks(r, k) for x, r in ranks.items()}
    return RetrieverSweep(enc.retriever, enc.encoder, enc.qids, enc.embeddings, rps, sizes)


def sweep(data: AuditData, retrievers: Sequence[Any], *, ns: Sequence[int] = (100, 200, 400, 800),
          ks: Sequence[int] = (1, 5, 10, 20, 50, 100), seed: int = 0, pooling: str = "auto",
          fig_k: int = 50) -> ArgusSweep:
    """RPS per target for every (retriever, N, k); ``fig_k`` is the k of the vs-N and LDA figures (the paper's 50).
    The settings are checked as ``ArgusSweepOptions`` checks them (``ns`` and ``ks`` sorted, once)."""
    o = ArgusSweepOptions(ns=tuple(ns), ks=tuple(ks), seed=seed, pooling=pooling, fig_k=fig_k)
    if not retrievers:
        raise ConfigError("give at least one retriever (such as 'dense' or 'random').")
    ns, ks = list(o.ns), list(o.ks)
    fig_k = o.fig_k if o.fig_k in ks else min(ks, key=lambda k: (abs(k - o.fig_k), k))
    runs = [sweep_one(data, r, ns, ks, seed, pooling) for r in retrievers]
    return sweep_report(data, runs, ns, ks, seed, fig_k).holding(data, runs)


def _cell(run: RetrieverSweep, n: int, k: int) -> SweepCell:
    scores = list(run.rps[(n, k)].values())
    fr = band_fractions(scores)
    all_n = [s for ss in run.sizes[n].values() for s in ss]
    return SweepCell(n=n, k=k, n_effective_min=int(min(all_n)), chance=chance_level(run.sizes[n], k),
                     mean_rps=float(np.mean(scores)), frac_rps_gt_0_5=fr["gt_0_5"],
                     bands={b: fr[b] for b in BAND_NAMES})


def sweep_report(data: AuditData, runs: Sequence[RetrieverSweep], ns: list[int], ks: list[int], seed: int,
                 fig_k: int) -> ArgusSweep:
    """sweep.json's report: every (N, k) cell of each retriever, and each target's RPS per (N, k)."""
    ents = data.entities
    retrievers = []
    for run in runs:
        targets = list(run.rps[(ns[0], ks[0])])
        retrievers.append(SweepRetriever(
            retriever=run.retriever, encoder=AuditEncoder(**run.encoder),
            cells=[_cell(run, n, k) for n in ns for k in ks],
            entities=[SweepEntity(qid=q, label=ents[q].label, rps=[[run.rps[(n, k)][q] for k in ks] for n in ns])
                      for q in targets]))
    return ArgusSweep(kind=KIND, version=1, task=data.source, seed=seed, n=ns, k=ks, fig_k=fig_k,
                      hit_rule="rank <= k", bands={"low": [0.0, 0.33], "mid": [0.33, 0.66], "high": [0.66, 1.0]},
                      retrievers=retrievers)


# ---------------------------------------------------------------- outputs
def cells_table(run: dict, ns: list[int], ks: list[int], field: str) -> Table:
    """One row per N, one column per k: mean RPS or the fraction with RPS > 0.5."""
    by = {(c["n"], c["k"]): c for c in run["cells"]}
    rows = [[str(n), str(by[(n, ks[0])]["n_effective_min"])] + [f"{by[(n, k)][field]:.3f}" for k in ks] for n in ns]
    return Table(["N", "N_eff min"] + [f"k={k}" for k in ks], rows, align="rr" + "r" * len(ks))


def sweep_markdown(d: dict) -> str:
    lines = [f"# ARGUS RPS sweep: {d['task']}", "",
             f"N in {d['n']}, k in {d['k']}, seed {d['seed']}, hit = {d['hit_rule']}; figures at k={d['fig_k']}.", ""]
    for run in d["retrievers"]:
        lines += [f"## {run['retriever']} ({run['encoder']['pooling']} pooling)", "",
                  "Mean RPS:", "", cells_table(run, d["n"], d["k"], "mean_rps").markdown(), "",
                  "Fraction of entities with RPS > 0.5:", "",
                  cells_table(run, d["n"], d["k"], "frac_rps_gt_0_5").markdown(), ""]
    return "\n".join(lines)


def _plot_lines(ax, xs: list[int], cells: list[dict], label: str) -> None:
    ax.plot(xs, [c["frac_rps_gt_0_5"] for c in cells], marker="o", label=f"{label}: RPS > 0.5")
    for band, style in (("low", ":"), ("high", "--")):
        ax.plot(xs, [c["bands"][band] for c in cells], linestyle=style, marker=".", label=f"{label}: {band} band")


def plot_curves(d: dict, path: Path, along: str) -> None:
    """Fractions of entities by band vs N at k=fig_k (``along="n"``) or vs k at the largest N (``"k"``)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    fixed_n, fixed_k = d["n"][-1], d["fig_k"]
    xs = d["n"] if along == "n" else d["k"]
    for run in d["retrievers"]:
        by = {(c["n"], c["k"]): c for c in run["cells"]}
        cells = [by[(x, fixed_k)] if along == "n" else by[(fixed_n, x)] for x in xs]
        _plot_lines(ax, xs, cells, run["retriever"])
    # the chance level over the pools actually drawn (mean k / N_eff), the same for every retriever
    ax.plot(xs, [c["chance"] for c in cells], color="black", linewidth=0.8, label="chance k/N_eff")
    ax.set_xlabel("neutral pool size N" if along == "n" else "top-k budget k")
    ax.set_ylabel("fraction of entities")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"ARGUS RPS vs {'N' if along == 'n' else 'k'} "
                 f"({'k=' + str(fixed_k) if along == 'n' else 'N=' + str(fixed_n)})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    write_figure(fig, path, dpi=120)


def plot_lda_grid(result: ArgusSweep, path: Path) -> None:
    """LDA of target embeddings by RPS tercile at k=fig_k: a row per retriever, a column per N."""
    plt = pyplot()
    rows, cols = len(result.runs), len(result.n)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    colours = ("#d62728", "#7f7f7f", "#1f77b4")
    for r, run in enumerate(result.runs):
        idx = {q: i for i, q in enumerate(run.qids)}
        for c, n in enumerate(result.n):
            rps = run.rps[(n, result.fig_k)]
            terc, _ = terciles(np.array(list(rps.values())))
            z, _ = lda_projection(run.embeddings[[idx[q] for q in rps]], terc)
            ax = axes[r][c]
            for t, name in enumerate(BAND_NAMES):
                sel = terc == t
                if sel.any():
                    ax.scatter(z[sel, 0], z[sel, 1], s=8, alpha=0.75, c=colours[t], label=f"{name} n={int(sel.sum())}")
            ax.set_title(f"{run.retriever}, N={n}", fontsize=9)
            ax.tick_params(labelsize=6)
            ax.legend(fontsize=6)
    fig.suptitle(f"ARGUS: LDA of entity embeddings by RPS tercile (k={result.fig_k})")
    fig.tight_layout()
    write_figure(fig, path, dpi=100)


def write_sweep(result: ArgusSweep, out: str | Path, *, plot: bool = True) -> dict[str, Path]:
    """Write sweep.json, sweep.md and (with ``plot``) sweep_vs_n.png, sweep_vs_k.png, sweep_lda.png into ``out``."""
    out = output_folder(out)
    d = result.model_dump(mode="json")
    paths = {"json": out / "sweep.json", "md": out / "sweep.md"}
    write_json(paths["json"], d)
    write_text_atomic(paths["md"], sweep_markdown(d))
    if plot:
        paths.update(vs_n=out / "sweep_vs_n.png", vs_k=out / "sweep_vs_k.png", lda=out / "sweep_lda.png")
        plot_curves(d, paths["vs_n"], "n")
        plot_curves(d, paths["vs_k"], "k")
        plot_lda_grid(result, paths["lda"])
    return paths
