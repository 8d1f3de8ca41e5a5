"""``gapbench argus ...``: the ARGUS entity retrievability audit and blind-spot probes.

Commands live on the sub-app ``app``; :func:`register` adds it to the main CLI as ``gapbench argus``. To add a command
from another module, decorate a function with ``@gapbench.cli.argus.app.command("name")`` in that module and list the
module in :data:`COMMAND_MODULES` (``register`` imports it), reusing :func:`load_audit_data` for the shared data
options.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path

import typer

from ..errors import ConfigError, OptionsError
from .from_options import FromOptions, add_command, command

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


def load_audit_data(entities: Path | None, relations: Path | None, relation_mode: str = "directed",
                    dataset: Path | None = None):
    """The shipped slice, a user's export given as entities + relations JSONL files, or a built dataset folder."""
    from ..analyses.argus.audit.inputs import load_jsonl, load_shipped

    if relation_mode not in ("directed", "undirected"):
        raise ConfigError(f"--relation-mode must be directed or undirected, got {relation_mode!r:.40}.")

    if dataset is not None:
        if entities is not None or relations is not None:
            raise ConfigError("give either --dataset DIR or --entities with --relations (or neither: the shipped "
                              "slice).")
        from ..analyses.argus.audit.rps_dataset import load_dataset

        return load_dataset(dataset, relations=relation_mode)
    if (entities is None) != (relations is None):
        raise ConfigError("give both --entities and --relations (a full export), or neither (the shipped slice).")
    if entities is None or relations is None:  # both, after the check above
        return load_shipped(relations=relation_mode)
    return load_jsonl(entities, relations, relations=relation_mode)


def _names(text: str) -> tuple[str, ...]:
    """``"ridge,mlp"`` -> ("ridge", "mlp"): a comma list of names (the options check each)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _split(text: str) -> tuple[float, float, float]:
    from ..analyses.argus.probe.probe_metrics import parse_split

    return parse_split(text)


def _ints(owner: str, field_name: str) -> Callable[[str], tuple[int, ...]]:
    """A parser of a comma list of integers for ``field_name`` of ``owner`` (refused text names the field)."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            return tuple(int(p) for p in text.split(",") if p.strip())
        except ValueError:
            raise OptionsError(owner, [(field_name, f"must be a comma list of integers such as 100,200,400,800, got "
                                                    f"{text!r}")]) from None

    return parse


OPTIONS = "gapbench.analyses.argus.argus_options:"
# the flags of audit, probe and sweep are their options' fields (probe's grid_set as --grids, sweep's ns and ks as --n
# and --k, the lists read from their comma text); what is analysed and where it goes are the commands' own
AUDIT = FromOptions("argus audit", OPTIONS + "ArgusAuditOptions")
PROBE = FromOptions("argus probe", OPTIONS + "ArgusProbeOptions", renamed={"grids": "grid_set"},
                    kinds={"families": str, "datasets": str, "split": str},
                    parse={"families": _names, "datasets": _names, "split": _split,
                           "rebalance_bins": lambda v: v or None},  # 0 reads as off, as None does
                    library_only=frozenset({"meta"}))
SWEEP = FromOptions("argus sweep", OPTIONS + "ArgusSweepOptions", renamed={"n": "ns", "k": "ks"},
                    kinds={"n": str, "k": str},
                    parse={"n": _ints("ArgusSweepOptions", "ns"), "k": _ints("ArgusSweepOptions", "ks")})

def _echo_audit(d: dict) -> None:
    ne = d["n_effective"]
    typer.echo(f"ARGUS audit {d['task']} | {d['retriever']} ({d['encoder']['pooling']} pooling) | k={d['k']} "
               f"N={d['n_requested']} (effective {ne['min']}-{ne['max']})")
    typer.echo(f"  targets {d['n_targets']}, pairs {d['n_pairs']}, mean RPS {d['mean_rps']:.4f}, "
               f"chance {d['chance']:.4f}, RPS>0.5: {d['frac_rps_gt_0_5']:.3f}")
    for w in d["warnings"]:
        typer.echo(f"  warning: {w}", err=True)


@command(AUDIT)
def audit_cmd(
    retriever: str = typer.Option("dense", "--retriever", "-r",
                                  help="dense, dense:model=NAME, or random[:dim=,seed=]."),
    entities: Path | None = typer.Option(None, "--entities", help=ENTITIES_HELP),
    relations: Path | None = typer.Option(None, "--relations", help=RELATIONS_HELP),
    dataset: Path | None = typer.Option(None, "--dataset", help=DATASET_HELP),
    relation_mode: str = typer.Option("directed", "--relation-mode", help="How the relations are read: directed "
                                                                          "(audit their sources) or undirected (every "
                                                                          "entity with an edge)."),
    options=None,  # ArgusAuditOptions, from its fields' flags (built before a large export is read)
    out: Path = typer.Option(..., "--out", "-o", help="Write argus_audit.json/.md, argus_lda.png here."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Skip the LDA plot."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON (without per-entity rows)."),
) -> None:
    """Entity retrievability audit: RPS_k per target entity against seeded neutral pools."""
    from ..analyses.argus.audit.audit_files import write_audit
    from ..analyses.argus.verbs import argus_audit
    from .common import check_output

    check_output(out, run_dir=False, option="out")
    data = load_audit_data(entities, relations, relation_mode, dataset)
    result = argus_audit(data, retriever, options)
    write_audit(result, out, plot=not no_plot)
    d = result.model_dump(mode="json")
    if as_json:
        typer.echo(json.dumps({key: v for key, v in d.items() if key != "entities"}))
    else:
        _echo_audit(d)
        typer.echo(f"  written to {out}")


@command(PROBE)
def probe_cmd(
    retriever: str = typer.Option("dense", "--retriever", "-r", help="dense, dense:model=NAME, or random."),
    entities: Path | None = typer.Option(None, "--entities", help=ENTITIES_HELP),
    relations: Path | None = typer.Option(None, "--relations", help=RELATIONS_HELP),
    dataset: Path | None = typer.Option(None, "--dataset", help=DATASET_HELP),
    options=None,  # ArgusProbeOptions, from its fields' flags
    out: Path = typer.Option(..., "--out", "-o", help="Write argus_probe.json/.md/_calibration.png and probe/ here."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Train RPS probes (ridge, xgboost, MLP) on entity embeddings; select on validation RMSE, report on test."""
    from ..analyses.argus.probe.probe_files import write_probe_report
    from ..analyses.argus.remedy.probe_binding import bind_probe
    from ..analyses.argus.verbs import argus_probe
    from ..schemas.argus import SavedProbe
    from .common import check_output

    check_output(out, run_dir=False, option="out")
    data = load_audit_data(entities, relations, "directed", dataset)  # each labelled set is read from its edges
    report = argus_probe(data, retriever, options)
    probe = report.probe
    probe_dir = probe.save(out / "probe")  # the probe of the largest labelled set, kept for augmentation
    report = report.model_copy(update={"saved_probe": SavedProbe(path=str(probe_dir),
                                                                 dataset=report.saved_probe.dataset)})
    bound = bind_probe(probe)  # the default diagnosis of this retriever (argus compare, run --augment) finds it
    write_probe_report(report, out)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json", exclude={"datasets"})))
        return
    for rep in report.datasets:
        typer.echo(_probe_line(rep.model_dump(mode="json")))
    typer.echo(f"probe saved to {probe_dir} and bound to the retriever ({bound}); report in {out}")


@command(SWEEP)
def sweep_cmd(
    retriever: list[str] = typer.Option(["dense"], "--retriever", "-r", help="Repeatable: dense, dense:model=NAME, "
                                                                              "random[:dim=,seed=]."),
    entities: Path | None = typer.Option(None, "--entities", help=ENTITIES_HELP),
    relations: Path | None = typer.Option(None, "--relations", help=RELATIONS_HELP),
    dataset: Path | None = typer.Option(None, "--dataset", help="A folder from `argus dataset build` (its stored "
                                                                   "candidates are used)."),
    options=None,  # ArgusSweepOptions, from its fields' flags
    out: Path = typer.Option(..., "--out", "-o", help="Write sweep.json/.md and the figures here."),
    no_plot: bool = typer.Option(False, "--no-plot", help="Skip the figures."),
) -> None:
    """RPS per entity for every (N, k) and retriever, with the paper's vs-N, vs-k and LDA figures."""
    from ..analyses.argus.audit.sweep import write_sweep
    from ..analyses.argus.verbs import argus_sweep
    from .common import check_output

    data = load_audit_data(entities, relations, dataset=dataset)
    check_output(out, run_dir=False, option="out")
    result = argus_sweep(data, retriever, options)
    paths = write_sweep(result, out, plot=not no_plot)
    typer.echo(f"ARGUS sweep {data.source}: {len(result.runs)} retriever(s) x N {result.n} x k {result.k}; "
               f"written {', '.join(p.name for p in paths.values())} to {out}")


add_command(app, "audit", audit_cmd)
add_command(app, "probe", probe_cmd)
add_command(app, "sweep", sweep_cmd)


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
    max_n: int | None = typer.Option(None, "--max", help="Write at most this many records."),
) -> None:
    """Build a reference KB of Wikipedia first paragraphs, read as a stream from files you have."""
    from ..analyses.argus.remedy.kb import build_kb

    st = build_kb(sources, out, fmt=fmt, max_n=max_n)
    typer.echo(f"KB written to {out}: {st.written} records from {len(st.sources)} source(s); skipped "
               f"{st.empty} empty paragraph(s), {st.duplicates} repeated id(s)"
               + (f"; stopped at --max {max_n}" if st.stopped_at_max else ""))
