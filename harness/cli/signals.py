"""``gapbench signals`` (cheap weak-retrieval signals, AUC table, calibrated gate) and ``gapbench gate``.

``gapbench signals TASK --retrievers bm25,dense -o DIR`` writes signals.json, signals.md, signals_per_query.tsv,
signals_auc.png and signals_gate.png (schema in :mod:`gapbench.analyses.signals`). ``gapbench gate RUN_DIR [RUN_DIR ...]
--signals DIR/signals.json -o OUT`` applies the stored gate to run directories made by ``gapbench run --output`` and
writes OUT/escalate.tsv (query_id, value, escalate 0/1); ``--either`` applies the gate on either of two signals firing
(``gate_either``; one value column per signal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .from_options import FromOptions, add_command, command

if TYPE_CHECKING:
    from ..types import Run

DEFAULT_RETRIEVERS = "bm25,dense"
# the flags of `gapbench signals` are SignalsOptions' fields, n_bootstrap as --bootstrap; the task, the retriever list
# and --json are the command's own
FLAGS = FromOptions("signals", "gapbench.analyses.signals.signals_options:SignalsOptions",
                    renamed={"bootstrap": "n_bootstrap"}, short={"window": ("-k",), "output": ("-o",)},
                    kinds={"output": Path | None}, library_only=frozenset({"term_extractor"}))


def register(app: typer.Typer) -> None:
    """Add the ``signals`` and ``gate`` commands to ``app``."""
    add_command(app, "signals", signals_cmd)
    app.command("gate")(gate_cmd)


@command(FLAGS)
def signals_cmd(
    task: str = typer.Argument(..., help="Task name (see `gapbench tasks`) or a BEIR-format folder."),
    retrievers: str = typer.Option(
        DEFAULT_RETRIEVERS, "--retrievers", "-r",
        help="Comma-separated retriever specs; the first is the primary (its window defines weak). Two dense specs "
             "(e.g. dense and dense:query_prompt=...) enable dense_agreement.",
    ),
    options=None,  # SignalsOptions, from its fields' flags
    as_json: bool = typer.Option(False, "--json", help="Print signals.json's content."),
) -> None:
    """Cheap weak-retrieval signals: AUC per signal, pruning, and a calibrated escalation gate."""
    from ..analyses.signals.signals_run import run_signals_with
    from .common import check_output, split_specs

    output = options.output
    check_output(output, run_dir=False)
    report = run_signals_with(task, split_specs(retrievers), options)
    d = report.model_dump(mode="json", exclude_unset=True)
    typer.echo(json.dumps(d) if as_json else str(report))
    if output is not None and not as_json:
        typer.echo(f"written to {output}")
    for warning in [*(d.get("evidence_warnings") or []), *((d.get("gate") or {}).get("evidence_warnings") or []),
                    *((d.get("gate_either") or {}).get("evidence_warnings") or [])]:
        typer.echo(f"gapbench: warning: {warning}", err=True)


def _same_task(run_dir: Path, manifest: dict[str, Any], first: str | None, stored: dict[str, Any],
               signals: Path) -> str | None:
    """The task of the runs so far: every run directory must be of one task, the one the gate was calibrated on (query
    ids such as 0..1499 recur across tasks, so a mixed set would be gated silently). A local task is compared by its
    content when signals.json records it (``task_key``), so runs of the same folder at another path pass."""
    from ..identity import LOCAL_REVISION, content_key, task_label
    from .common import fail

    task, fps = manifest.get("task") or {}, manifest.get("fingerprints") or {}
    name = task.get("name")
    key = name
    if stored.get("task_key") and task.get("revision") == LOCAL_REVISION and all(fps.get(k) for k in
                                                                                  ("corpus", "queries", "qrels")):
        key = content_key(fps["corpus"], fps["queries"], fps["qrels"])
    calibrated = stored.get("task_key") or stored.get("task")
    shown = task_label(name or "", key or "")
    if key and first and key != first:
        fail(f"{run_dir}: a run of task {shown!r}, while the run directories before it are of {first!r}; give run "
             "directories of one task.")
    if key and calibrated and key != calibrated:
        cal_shown = task_label(stored.get("task") or "", calibrated)
        fail(f"{run_dir}: a run of task {shown!r}, but the gate in {signals} was calibrated on {cal_shown!r}; give "
             f"runs of that task, or compute signals on {name!r} with {_signals_command(task)}.")
    return first or key


def task_spec(task: dict[str, Any]) -> str | None:
    """The task string that makes a run's task again: the manifest's ``spec``, else the one a local task's files imply
    (:func:`gapbench.identity.recorded_spec`), else its name when that is one (a registered task or a folder); None
    when none is (``local/trec/topics.txt`` alone names a task no string makes)."""
    from ..errors import GapbenchError
    from ..identity import recorded_spec
    from ..task import get_task

    if task.get("spec"):
        return str(task["spec"])
    if task.get("revision") == "local":  # a manifest written before the spec was recorded: rebuilt from its files
        try:
            spec = recorded_spec(task)
        except (KeyError, TypeError):
            spec = None
        if spec:
            return spec
    name = task.get("name")
    if not isinstance(name, str):
        return None
    try:
        get_task(name)
    except (GapbenchError, TypeError, ValueError):
        return None
    return name


def _signals_command(task: dict[str, Any]) -> str:
    """A `gapbench signals` command line for a run's task that works, or how to write one."""
    import shlex

    spec = task_spec(task)
    if spec is not None:
        return f"`gapbench signals {shlex.quote(spec)} -o DIR`"
    source = f" (its files: {task['source']})" if task.get("source") else ""
    return (f"`gapbench signals TASK -o DIR`, TASK written as you gave it to `gapbench run`{source}, e.g. "
            "local/trec:topics=FILE,qrels=FILE,corpus=FILE")


def gate_cmd(
    run_dirs: list[Path] = typer.Argument(
        ..., help="Run directories (gapbench run --output) holding the signal's ingredients."),
    signals: Path = typer.Option(..., "--signals", help="signals.json (or its directory) from `gapbench signals`."),
    output: Path | None = typer.Option(None, "--output", "-o",
                                          help="Directory for escalate.tsv (default: the first run directory)."),
    either: bool = typer.Option(False, "--either",
                                help="Apply the gate on either of two signals firing (gate_either)."),
) -> None:
    """Mark the queries of a run to escalate with a calibrated gate (writes escalate.tsv)."""
    from ..analyses.gate_retrievers import match_gate_runs
    from ..analyses.signals.signals_report import gate_warning
    from ..analyses.signals.stored import gate_runs, gate_signals, load_signals, write_escalations
    from ..store import load_manifest, load_run
    from .common import fail

    stored = load_signals(signals, "gate_either" if either else "gate")
    entries: dict[str, tuple[dict[str, Any], Run]] = {}
    task_name: str | None = None
    task: dict[str, Any] = {}
    for d in run_dirs:
        manifest = load_manifest(d)
        task = manifest.get("task") or {}
        task_name = _same_task(d, manifest, task_name, stored, signals)
        entry = manifest.get("retriever") or {"name": manifest.get("system") or d.name}
        entries[str(d)] = (entry, load_run(d))
    names = gate_signals(stored, either)
    runs = match_gate_runs(stored, entries, names, source=signals)
    corpus = queries = None
    if "evidence_coverage" in names:
        from ..task import get_task

        spec = task_spec(task) if task_name else None
        if spec:
            data = get_task(spec).load()
            corpus, queries = data.corpus, data.queries
        else:
            fail(f"{run_dirs[0]}: the manifest names no task that can be loaded again; evidence_coverage needs the "
                 "task's texts.")
    qids, values, flags = gate_runs(runs, stored, corpus=corpus, queries=queries, either=either)
    out_dir = Path(output) if output is not None else Path(run_dirs[0])
    path = write_escalations(out_dir / "escalate.tsv", qids, values, flags, names if either else None)
    rule = stored["gate_either" if either else "gate"]["rule"]
    typer.echo(f"{int(flags.sum())} of {len(qids)} queries escalate ({rule}); written to {path}")
    warning = None if either else gate_warning(stored)
    # the held-out evidence signals.json recorded for this gate (absent in files written before it)
    thin = stored["gate_either" if either else "gate"].get("evidence_warnings") or []
    for w in ([warning] if warning else []) + thin:
        typer.echo(f"gapbench: warning: {w}", err=True)
