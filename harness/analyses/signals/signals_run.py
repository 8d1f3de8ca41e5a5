"""A signals run end to end: retrieve with each retriever, compute the signals and the weak labels, analyse them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...types import Run
from ..gate_retrievers import retriever_identity
from .definitions import compute_signals, weak_labels
from .signals_options import SignalsOptions
from .signals_report import SignalsReport, analyse, save_report


def run_signals_with(task: str, retrievers: Sequence[str], options: SignalsOptions) -> SignalsReport:
    """Run the retrievers on a task (top-``window`` each), compute the signals, the AUC table and the gate; with
    ``options.output``, write the report there (:func:`save_report`)."""
    from ...pipeline import prepare

    options.check(retrievers)
    prepared = prepare(task, max_queries=options.max_queries, seed=options.seed, judged=options.min_rel)
    data, qids = prepared.data, prepared.query_ids
    built = {spec: prepared.retrieve(spec, options.window) for spec in retrievers}
    runs: dict[str, Run] = {spec: run for spec, (_, run) in built.items()}
    primary = options.primary or retrievers[0]
    table = compute_signals(runs, qids, window=options.window, primary=primary, corpus=data.corpus,
                            queries=data.queries, term_extractor=options.term_extractor)
    labels = weak_labels(runs[primary], data.qrels, qids, options.window, options.min_rel)
    report = analyse(table, labels, task=prepared.task.name, bar=options.bar, max_corr=options.max_corr,
                     n_bootstrap=options.n_bootstrap, seed=options.seed, calib_fraction=options.calib_fraction,
                     target_catch=options.target_catch, gate_signal=options.gate_signal,
                     meta=_meta(options, retrievers, built, prepared),
                     either_max_corr=options.either_max_corr)
    if options.output is not None:
        save_report(report, options.output)
    return report


def _meta(options: SignalsOptions, retrievers: Sequence[str], built: Mapping[str, tuple[Any, Run]],
          prepared: Any) -> dict[str, Any]:
    """signals.json's settings: the options', each retriever's identity and, for a local task, its content key (the
    gate compares run directories' tasks by it, so the same folder at another path is the same task)."""
    from ...identity import LOCAL_REVISION, data_key

    meta = options.meta(retrievers, {s: retriever_identity(r) for s, (r, _) in built.items()})
    if prepared.task.revision == LOCAL_REVISION:
        meta["task_key"] = data_key(prepared.data)
    return meta


def signals(task: str, retrievers: str | Sequence[str], options: SignalsOptions | None = None) -> SignalsReport:
    """Weak-retrieval signals and the gate calibrated on them (see :mod:`gapbench.analyses.signals`).

    >>> options = SignalsOptions(window=20)
    >>> report = gapbench.signals("impliret/unispeaker/wknow", ["bm25", "dense"], options)  # doctest: +SKIP
    """
    specs = [retrievers] if isinstance(retrievers, str) else list(retrievers)
    return run_signals_with(task, specs, options or SignalsOptions())
