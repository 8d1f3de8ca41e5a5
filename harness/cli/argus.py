"""``gapbench argus ...``: the ARGUS entity retrievability audit and blind-spot probes.

Commands live on the sub-app ``app``; :func:`register` adds it to the main CLI as ``gapbench argus``. To add a command
from another module, decorate a function with ``@gapbench.cli.argus.app.command("name")`` in that module and list the
module in :data:`COMMAND_MODULES` (``register`` imports it), reusing :func:`load_audit_data` for the shared data options.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Optional

import typer

from ..errors import ConfigError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ARGUS: entity retrievability audit (RPS) and blind-spot probes.")

# modules whose import adds more commands to ``app`` (e.g. "gapbench.cli.argus_compare"); imported by register()
COMMAND_MODULES: list[str] = ["gapbench.cli.argus_dataset"]

ENTITIES_HELP = "Entities JSONL {qid, label, paragraph}; default: the shipped 620-paragraph slice."
RELATIONS_HELP = "Relations JSONL {source, target} (or {qid, related: [...]}); needed with --entities."
DATASET_HELP = ("A folder written by `gapbench argus dataset build` (entities, relations and the stored KG-disjoint "
                "candidates); instead of --entities/--relations.")


def register(main_app: typer.Typer) -> None:
    """Add ``gapbench argus`` to ``main_app`` (idempotent)."""
    for mod in COMMAND_MODULES:
        importlib.import_module(mod)
    if any(g.name == "argus" for g in main_app.registered_groups):
        return
    main_app.add_typer(app, name="argus")


def load_audit_data(entities: Optional[Path], relations: Optional[Path], relation_mode: str = "directed",
                    dataset: Optional[Path] = None):
    """The shipped slice, a user's export given as entities + relations JSONL files, or a built dataset folder."""
    from ..analyses.argus.audit import load_jsonl, load_shipped

    if dataset is not None:
        if entities is not None or relations is not None:
            raise ConfigError("give either --dataset DIR or --entities with --relations (or neither: the shipped "
                              "slice).")
        from ..analyses.argus.dataset import load_dataset

        return load_dataset(dataset, relations=relation_mode)
    if (entities is None) != (relations is None):
        raise ConfigError("give both --entities and --relations (a full export), or neither (the shipped slice).")
    if entities is None:
        return load_shipped(relations=relation_mode)
    return load_jsonl(entities, relations, relations=relation_mode)


def _echo_audit(d: dict) -> None:
    ne = d["n_effective"]
    typer.echo(f"ARGUS audit {d['task']} | {d['retriever']} ({d['encoder']['pooling']} pooling) | k={d['k']} "
               f"N={d['n_requested']} (effective {ne['min']}-{ne['max']})")
    typer.echo(f"  targets {d['n_targets']}, pairs {d['n_pairs']}, mean RPS {d['mean_rps']:.4f}, "
               f"chance {d['chance']:.4f}, RPS>0.5: {d['frac_rps_gt_0_5']:.3f}")
    for w in d["warnings"]:
        typer.echo(f"  warning: {w}", err=True)


@app.command("audit")
def audit_cmd(
    retriever: str = typer.Option("dense", "--retriever", "-r", help="dense, dense:model=NAME, or random[:dim=,seed=]."),
    entities: Optional[Path] = typer.Option(None, "--entities", help=ENTITIES_HELP),
    relations: Optional[Path] = typer.Option(None, "--relations", help=RELATIONS_HELP),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help=DATASET_HELP),
    relation_mode: str = typer.Option("directed", "--relation-mode", help="directed (audit sources) or undirected."),
    k: int = typer.Option(50, "--k", help="Top-k budget: a hit is rank <= k."),
    n: int = typer.Option(800, "--n", help="Candidates per query (target + N-1 neutrals); capped by what exists."),
    pooling: str = typer.Option("auto", "--pooling", help="auto, span or sentence."),
    seed: int = typer.Option(0, "--seed"),
    out: Path = typer.Option(..., "--out", "-o", help="Write argus_audit.json/.md, argus_lda.png here."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Skip the LDA plot."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON (without per-entity rows)."),
) -> None:
    """Entity retrievability audit: RPS_k per target entity against seeded neutral pools."""
    from ..analyses.argus.audit import audit, check_budget, write_audit
    from .common import check_output

    check_budget(k, n)  # before a large export is read
    check_output(out, run_dir=False, option="out")
    data = load_audit_data(entities, relations, relation_mode, dataset)
    result = audit(data, retriever, k=k, n=n, seed=seed, pooling=pooling)
    write_audit(result, out, plot=not no_plot)
    d = result.to_dict()
    if as_json:
        typer.echo(json.dumps({key: v for key, v in d.items() if key != "entities"}))
    else:
        _echo_audit(d)
        typer.echo(f"  written to {out}")


@app.command("probe")
def probe_cmd(
    retriever: str = typer.Option("dense", "--retriever", "-r", help="dense, dense:model=NAME, or random."),
    entities: Optional[Path] = typer.Option(None, "--entities", help=ENTITIES_HELP),
    relations: Optional[Path] = typer.Option(None, "--relations", help=RELATIONS_HELP),
    dataset: Optional[Path] = typer.Option(None, "--dataset", help=DATASET_HELP),
    k: int = typer.Option(50, "--k"),
    n: int = typer.Option(800, "--n"),
    pooling: str = typer.Option("auto", "--pooling", help="auto, span or sentence."),
    seed: int = typer.Option(0, "--seed", help="Seeds the neutral sampling, the split and the probes."),
    families: str = typer.Option("ridge,xgboost,mlp", "--families", help="Probe families to try."),
    datasets: str = typer.Option("directed,undirected", "--datasets",
                                 help="Labelled sets: directed (audited targets only) and/or undirected (every "
                                      "entity with an edge, edges read both ways)."),
    split: str = typer.Option("70,15,15", "--split", help="Train,validation,test shares (the paper's 70,15,15; "
                                                          "gapbench's earlier default was 60,20,20)."),
    rebalance_bins: int = typer.Option(0, "--rebalance-bins", help="Oversample the training split to the largest of "
                                                                   "this many RPS bins (the authors' code: 100); 0: off."),
    grids: str = typer.Option("reduced", "--grids", help="reduced (a cheap sweep) or paper (appendix C.1, 2,187 "
                                                         "xgboost and 81 MLP configurations)."),
    tau: float = typer.Option(0.3, "--tau", help="Blind-spot threshold of the classification view (RPS < tau)."),
    out: Path = typer.Option(..., "--out", "-o", help="Write argus_probe.json/.md/_calibration.png and probe/ here."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Train RPS probes (ridge, xgboost, MLP) on entity embeddings; select on validation RMSE, report on test."""
    from ..analyses.argus.audit import check_budget
    from ..analyses.argus.augment import check_tau
    from ..analyses.argus.probe import parse_split, write_probe_report
    from .common import check_output

    check_budget(k, n)
    check_output(out, run_dir=False, option="out")
    modes = _probe_modes(datasets)
    check_tau(tau, f"--tau {tau:g}")
    protocol = {"families": [f.strip() for f in families.split(",") if f.strip()], "split": parse_split(split),
                "rebalance_bins": rebalance_bins or None, "grid_set": grids, "tau": tau}
    runs = [_probe_dataset(load_audit_data(entities, relations, mode, dataset), mode, retriever, k=k, n=n, seed=seed,
                           pooling=pooling, **protocol) for mode in modes]
    reports = [rep for _, rep, _ in runs]
    # the probe saved for later use (augmentation) is the one trained on the most labelled entities
    best = max(range(len(reports)), key=lambda i: reports[i]["n"])
    probe, rep, _ = runs[best]
    _, _, (source, result) = runs[-1]  # the task and encoder as the last set saw them (the same retriever for each)
    probe_dir = probe.save(out / "probe")
    from ..analyses.argus.augment import bind_probe

    bound = bind_probe(probe)  # the default diagnosis of this retriever (argus compare, run --augment) finds it
    report = {"kind": "argus_probe", "task": source, "version": 1, "retriever": result.retriever,
              "fingerprint": result.encoder["fingerprint"], "dim": result.encoder["dim"], "seed": seed, "k": k,
              "n_requested": n, "saved_probe": {"path": str(probe_dir), "dataset": rep["name"]},
              **{key: rep[key] for key in ("split", "selection", "selected", "families", "baselines", "test")},
              "datasets": reports}
    write_probe_report(report, out)
    if as_json:
        typer.echo(json.dumps({key: v for key, v in report.items() if key != "datasets"}))
        return
    for rep in reports:
        typer.echo(_probe_line(rep))
    typer.echo(f"probe saved to {probe_dir} and bound to the retriever ({bound}); report in {out}")


def _probe_modes(datasets: str) -> list[str]:
    modes = [m.strip() for m in datasets.split(",") if m.strip()]
    if not modes or any(m not in ("directed", "undirected") for m in modes):
        raise ConfigError(f"--datasets takes directed and/or undirected, got {datasets!r}.")
    return modes


def _probe_dataset(data, mode: str, retriever: str, *, k: int, n: int, seed: int, pooling: str, **protocol):
    """Audit one labelled set (directed or undirected) and train the probes on its RPS: (probe, report, (source,
    audit result)). ``protocol``: train_probe's families, split, rebalance_bins, grid_set and tau."""
    from ..analyses.argus.audit import audit
    from ..analyses.argus.probe import train_probe

    result = audit(data, retriever, k=k, n=n, seed=seed, pooling=pooling)
    targets, emb = result.target_embeddings()
    rps = result.rps()
    meta = {"retriever": result.retriever, "pooling": result.encoder["pooling"], "k": k, "n": n,
            "dataset": mode, "encoder_fingerprint": result.encoder["fingerprint"],
            "retriever_fingerprint": result.encoder["retriever_fingerprint"]}
    probe, rep = train_probe(emb, [rps[q] for q in targets], result.encoder["fingerprint"], seed=seed, meta=meta,
                             **protocol)
    rep["name"] = f"{mode} ({'audited targets' if mode == 'directed' else 'every entity with an edge'})"
    rep["audit"] = {"mean_rps": float(sum(rps.values()) / len(rps)), "chance": result.chance(),
                    "n_effective_min": min(min(v) for v in result.n_candidates.values())}
    return probe, rep, (data.source, result)


def _probe_line(rep: dict) -> str:
    t = rep["test"]
    b = t["blind_spot"]
    return (f"{rep['name']}: n={rep['n']} selected {rep['selected']['family']} | test RMSE {t['rmse']:.3f} "
            f"(train-mean baseline {rep['baselines']['train_mean']['rmse']:.3f}), Spearman "
            f"{'n/a' if t['spearman'] is None else format(t['spearman'], '.3f')}, band acc {t['band_accuracy']:.3f}, "
            f"blind spots (RPS < {b['tau']:g}) acc {b['accuracy']:.3f} macro-F1 {b['macro_f1']:.3f}")


kb_app = typer.Typer(add_completion=False, no_args_is_help=True,
                     help="Reference KBs for ARGUS augmentation (--kb PATH).")
app.add_typer(kb_app, name="kb")


@kb_app.command("build")
def kb_build_cmd(
    sources: list[Path] = typer.Argument(..., help="JSONL {title, text[, id]}, enwiki abstracts XML[.gz] or "
                                                   "wikimedia/wikipedia parquet files."),
    out: Path = typer.Option(..., "--out", "-o", help="The KB JSONL to write (what --kb PATH reads)."),
    fmt: str = typer.Option("auto", "--format", help="auto (from each file's name), jsonl, abstracts-xml or parquet."),
    max_n: Optional[int] = typer.Option(None, "--max", help="Write at most this many records."),
) -> None:
    """Build a reference KB of Wikipedia first paragraphs, read as a stream from files you have."""
    from ..analyses.argus.kb import build_kb

    st = build_kb(sources, out, fmt=fmt, max_n=max_n)
    typer.echo(f"KB written to {out}: {st.written} records from {len(st.sources)} source(s); skipped "
               f"{st.empty} empty paragraph(s), {st.duplicates} repeated id(s)"
               + (f"; stopped at --max {max_n}" if st.stopped_at_max else ""))
