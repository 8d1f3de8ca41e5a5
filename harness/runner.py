"""``gapbench.run(task, retriever)``: load, index, search (exclusions masked), evaluate, record."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator

from . import distributed
from .budget import limited
from .budget import memory_budget as memory_budget_bytes
from .contract import Depth, Folder, Options, Seed, Text, not_blank
from .errors import ConfigError, OptionsError
from .evaluation.evaluation import _distinct_measures, depth_notes, evaluate, split_measures
from .pipeline import Prepared, prepare
from .retrieval import config_of, fingerprint_of, get_retriever, llm_manifest_of
from .schemas.run import RunManifest, RunResults, SuiteResults
from .store import (
    MANIFEST_VERSION,
    RunDirWriter,
    check_replace,
    check_run_dir_target,
    package_versions,
    save_run_dir,
    utc_now,
)
from .suites import Suite, get_suite
from .task import Task, get_task
from .types import Run, TaskData


class RunOptions(Options):
    """Every setting of :func:`run` (and :func:`run_suite`) but the task and the retriever, checked when made: a value
    no run accepts raises :class:`~gapbench.errors.OptionsError` naming the field, before any work. Example::

        result = gapbench.run("impliret/multispeaker/wknow", "bm25", RunOptions(k=100, measures=("nDCG@10", "R@100")))
        result = gapbench.run("impliret/multispeaker/wknow", "bm25", k=100)  # the same: keywords build the options
    """

    verb = "gapbench.run"  # named by the error of a setting it does not have

    measures: tuple[str, ...] | None = Field(
        None, description="Measures as ir-measures (nDCG@10, R@100, AP) or trec_eval (map, P_10) names them; None: "
                          "the task's own.")
    k: Depth = Field(1000, description="Documents retrieved per query.")
    output: Folder | None = Field(None, description="Write a run directory here (run.trec.gz, results, manifest).")
    overwrite: bool = Field(False, description="Let output replace a run directory of another task or retriever.")
    seed: Seed = Field(0, description="Seed of the bootstrap CIs, recorded in the manifest.")
    reranker: Annotated[Any, BeforeValidator(not_blank)] = Field(None, description="A reranker spec (tournament, "
                                                                                   "sliding-window, with "
                                                                                   "NAME:key=value "
                                            "options) or a reranker object; None: no reranking.")
    llm_base_url: Text | None = Field(None, description="OpenAI-compatible endpoint of LLM rerankers, retrievers "
                                                           "and augmenters (else $OPENAI_BASE_URL).")
    llm_model: Text | None = Field(None, description="The model at that endpoint.")
    augment: Text | None = Field(None, description="argus-expand or argus-synth (ARGUS views), with options.")
    memory_budget: int | None = Field(
        None, description="Working memory of the large-corpus paths in bytes (a size such as '4GB' is read); None: "
                          "$GAPBENCH_MEMORY_BUDGET, else 2 GiB.")
    ray: Text | None = Field(None, description="Encode and search on Ray: local, auto, HOST:PORT or "
                                                  "ray://HOST:PORT; None: in this process.")

    @field_validator("measures", mode="before")
    @classmethod
    def _measures(cls, value: Any) -> Any:
        if value is None:
            return None
        items = split_measures(value) if isinstance(value, str) else list(value) if isinstance(value, Iterable) \
            else value
        if isinstance(items, list) and not items:  # not None: an empty list must not quietly mean the task's own
            raise ValueError("is empty; give measures such as ['nDCG@10', 'R@100'], or leave it out for the task's own")
        try:
            _distinct_measures(items)
        except ConfigError as exc:
            raise ValueError(f"must be measures gapbench reads; {str(exc).rstrip('.')}") from None
        # as given (a trec_eval name stays one), each checked; an ir_measures object by its name
        return tuple(m if isinstance(m, str) else str(m) for m in items)

    @field_validator("memory_budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        from .budget import MINIMUM, parse

        if isinstance(value, str):
            try:
                return parse(not_blank(value), "memory_budget")
            except ConfigError as exc:
                # "'4XB' is not a size; ...": the field is named by OptionsError
                raise ValueError(str(exc).removeprefix("memory_budget ").rstrip(".")) from None
        if isinstance(value, int) and not isinstance(value, bool) and value < MINIMUM:
            raise ValueError(f"is {value:,} bytes, below the smallest budget gapbench works in (64 MiB); give more")
        return value

    @field_validator("ray")
    @classmethod
    def _ray(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                distributed.address_kind(value)
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("ray=").rstrip(".")) from None
        return value

    def depth_notes(self, measures: Iterable[str], flag: str = "k=") -> list[str]:
        """What the measures read beyond the run's k (:func:`gapbench.evaluation.evaluation.depth_notes`)."""
        return depth_notes(measures, self.k, flag)


def run(
    task: str | Task,
    retriever: str | Any,
    options: RunOptions | None = None,
    **settings: Any,
) -> RunResults:
    """Run a retriever on a task and evaluate it, with the settings of ``options`` (a :class:`RunOptions`) or given as
    keywords (``k=100``), which build one (a keyword given with ``options`` replaces that setting).

    >>> result = gapbench.run("impliret/multispeaker/wknow", "bm25")  # doctest: +SKIP
    >>> result.means["nDCG@10"], result.manifest.versions["gapbench"]  # doctest: +SKIP

    The result is the run's :class:`gapbench.schemas.RunResults` (``results.json``) holding, in memory, the
    :class:`~gapbench.types.Run` (``result.run``), its :class:`gapbench.schemas.RunManifest` (``result.manifest``)
    and the run directory written (``result.output``, or None).

    ``memory_budget`` (bytes, or a size such as ``"4GB"``) bounds the working memory of the large-corpus paths for
    the whole run (see :mod:`gapbench.budget`) and is recorded in the manifest. With ``output``, run.trec.gz is written
    batch by batch as the queries are searched (unless a reranker reorders the run afterwards). ``ray`` (``"local"``,
    ``"auto"`` or a cluster address) runs it on Ray: dense encoding and large searches spread over the cluster's
    workers (see :mod:`gapbench.distributed`); the manifest records the address kind and the workers used.
    An ``output`` that holds a run of another task or retriever is refused before any work
    (:class:`gapbench.store.RunDirInUse`) unless ``overwrite``; a run of the same task and retriever is replaced.
    A measure that reads deeper than ``k`` (R@100 with k=10; AP, which reads the whole ranking, under k=1000) is
    named in the manifest's ``notes`` and the results' notes.
    """
    o = RunOptions.of(options, settings)
    measures, k, output, seed, overwrite = o.measures, o.k, o.output, o.seed, o.overwrite
    reranker, llm_base_url, llm_model, augment = o.reranker, o.llm_base_url, o.llm_model, o.augment
    memory_budget, ray = o.memory_budget, o.ray
    if output is not None:
        check_run_dir_target(output)  # a file or a foreign folder there is refused before the task loads
    task_obj = get_task(task) if not isinstance(task, Task) else task
    measures = tuple(measures) if measures is not None else task_obj.measures
    retr = get_retriever(retriever, llm_base_url=llm_base_url, llm_model=llm_model)
    # Built before any retrieval, so a bad endpoint or option is reported before minutes of work.
    rr, applied = _reranker(reranker, task_obj, llm_base_url, llm_model) if reranker is not None else (None, {})
    name = getattr(retr, "name", None) or type(retr).__name__
    with limited(memory_budget), ExitStack() as stack:
        stack.enter_context(distributed.connect(ray))
        prepared = prepare(task_obj)
        data, queries = prepared.data, prepared.queries
        if output and not overwrite and not augment:  # before minutes of work, which would be lost at the end
            check_replace(output, lambda: _identity(prepared, retr, rr, augment))
        timings: dict[str, float] = {}
        augment_info = None
        if augment:
            with _timed(timings, "augment_s"):
                retr, augment_info = _augmented(retr, augment, data, llm_base_url, llm_model)
            name = retr.name
            if output and not overwrite:  # the augmented retriever's fingerprint covers its views: known only now
                check_replace(output, lambda: _identity(prepared, retr, rr, augment))
        with _timed(timings, "index_s"):
            retr.index(data.corpus)
        with _timed(timings, "search_s"):
            # Without a reranker the run searched is the run kept, so it is written as it is produced (or, when
            # the cache holds a file of the same ranked lists, taken from there).
            writer = stack.enter_context(RunDirWriter(output)) if output and rr is None else None
            result_run = _search(retr, prepared, k, writer, _identity(prepared, retr, None, augment))
        rerank_info = None
        if rr is not None:
            with _timed(timings, "rerank_s"):
                result_run = rr.rerank(queries, result_run, data.corpus)
            rerank_info = _rerank_entry(rr, applied)
            name = result_run.name
        results = evaluate(result_run, data.qrels, measures, task=task_obj.name, seed=seed, depth=k)
        if data.unjudged:  # queries the loader left out (no judgement): not searched, counted as trec_eval's are
            results = results.model_copy(update={"n_unjudged": results.n_unjudged + data.unjudged})
        manifest = _manifest(prepared, retr, name, results, k=k, seed=seed, reranker=rerank_info,
                             augment=augment_info, timings=timings)
        _say_degenerate(result_run, name, manifest)
        out: Path | None
        if writer is not None:
            out = writer.finish(results, manifest)
        else:
            out = save_run_dir(output, result_run, results, manifest) if output else None
    # the manifest as the file holds it (a config's tuples as lists, paths as text), read by the file's model
    recorded = RunManifest.model_validate_json(json.dumps({"manifest_version": MANIFEST_VERSION, **manifest},
                                                          default=str))
    return results.holding(run=result_run, manifest=recorded, output=out)


def _identity(prepared: Prepared, retr: Any, rr: Any, augment: str | None) -> dict[str, Any]:
    """The :func:`gapbench.store.run_identity` of the run about to be made."""
    return {"task": prepared.task.name, "revision": prepared.task.revision, "corpus": prepared.data.corpus.fingerprint,
            "queries": prepared.queries.fingerprint, "qrels": prepared.data.qrels.fingerprint,
            "retriever": getattr(retr, "name", None) or type(retr).__name__,
            "fingerprint": fingerprint_of(retr), "reranker": getattr(rr, "name", type(rr).__name__) if rr else None,
            "augment": augment or None}


@contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Record the seconds the block took as ``timings[key]`` (rounded as the manifest keeps them)."""
    t0 = time.perf_counter()
    yield
    timings[key] = round(time.perf_counter() - t0, 4)


def _reranker(spec: str | Any, task: Task, llm_base_url: str | None,
              llm_model: str | None) -> tuple[Any, dict[str, Any]]:
    """(the reranker, the task's defaults it took): a reranker named by a spec takes the task's defaults for it
    (OBLIQ's tournament settings), as gapbench gap takes them."""
    from .retrieval import get_reranker, with_task_defaults

    spec, applied = with_task_defaults(spec, task.reranker_defaults)
    return get_reranker(spec, llm_base_url=llm_base_url, llm_model=llm_model), applied


def _augmented(retr: Any, augment: str, data: TaskData, llm_base_url: str | None,
               llm_model: str | None) -> tuple[Any, dict[str, Any]]:
    """(the retriever over the augmented corpus, what the augmenter records), through the RUN_AUGMENTERS registry."""
    from .retrieval import RUN_AUGMENTERS
    from .specs import parse_spec

    augment_with = RUN_AUGMENTERS.get(parse_spec(augment, "augmenter")[0])
    augmented: tuple[Any, dict[str, Any]] = augment_with(augment, retr, data.corpus, llm_base_url=llm_base_url,
                                                         llm_model=llm_model)
    return augmented


def _rerank_entry(rr: Any, applied: dict[str, Any]) -> dict[str, Any]:
    """The manifest's ``reranker``: name, config, task defaults used, and the LLM's settings and answers if any."""
    entry = {"name": getattr(rr, "name", type(rr).__name__), "config": config_of(rr), "task_defaults": applied}
    llm = llm_manifest_of(rr)
    if llm is not None:
        entry["llm"] = llm
    if hasattr(rr, "answers"):  # how the model's answers were read: clean, repaired, re-asked, fallback
        entry["answers"] = rr.answers
    return entry


def _manifest(prepared: Prepared, retr: Any, name: str, results: RunResults, *, k: int, seed: int,
              reranker: dict[str, Any] | None, augment: dict[str, Any] | None,
              timings: dict[str, float]) -> dict[str, Any]:
    """What produced the run (``manifest.json``, :class:`gapbench.schemas.RunManifest`)."""
    data = prepared.data
    return {
        "task": prepared.task.info(),
        "system": name,
        "retriever": {
            "name": name,
            "class": f"{type(retr).__module__}.{type(retr).__qualname__}",
            "config": config_of(retr),
            "fingerprint": fingerprint_of(retr),
        },
        "fingerprints": {
            "corpus": data.corpus.fingerprint,
            "queries": prepared.queries.fingerprint,
            "qrels": data.qrels.fingerprint,
        },
        "reranker": reranker,
        "augment": augment,
        "k": k,
        "measures": list(results.measures),
        "seed": seed,
        "memory_budget": memory_budget_bytes(),
        "ray": distributed.manifest(),
        "date": utc_now(),
        "versions": package_versions(),
        "timings": timings,
        "notes": list(results.notes),
        "queries": {"n_queries": results.n_queries, "n_missing": results.n_missing, "n_dropped": results.n_dropped,
                    "n_unjudged": results.n_unjudged},
    }


def _say_degenerate(result_run: Run, name: str, manifest: dict[str, Any]) -> None:
    """A ranking that ignores the query (the same for every query, or every score tied) is said on the terminal and
    kept in the manifest's notes (:mod:`gapbench.degenerate`)."""
    from .degenerate import degenerate_notes
    from .progress import say

    for note in degenerate_notes(result_run):
        say(f"{name}: {note}.")
        manifest["notes"] = [*manifest.get("notes", []), note]


def _search(retr: Any, prepared: Prepared, k: int, writer: RunDirWriter | None, identity: dict[str, Any]) -> Run:
    """Search in batches; each batch is checked against the corpus and, given a writer, appended to run.trec.gz
    (the run's ``identity`` and ``k`` are the hint under which its file is kept, :meth:`RunDirWriter.run_file`)."""
    if writer is None:
        return prepared.search(retr, k)
    hint = json.dumps({**identity, "k": k}, sort_keys=True, default=str)
    with writer.run_file(hint=hint) as append:
        return prepared.search(retr, k, on_batch=append)


def run_suite(suite: str | Suite, retriever: str | Any, options: RunOptions | None = None,
              **settings: Any) -> SuiteResults:
    """Run one retriever over every task of a suite, with the settings of :func:`run` (``options`` or keywords); with
    ``output`` each task gets ``output/<task name>`` (a run of another retriever there is refused unless
    ``overwrite``, as :func:`run` does). A suite run takes no reranker, augmenter or LLM endpoint: run its tasks one
    by one for those."""
    o = RunOptions.of(options, settings)
    given = [f for f in ("reranker", "augment", "llm_base_url", "llm_model") if getattr(o, f) is not None]
    if given:
        raise OptionsError("RunOptions", [(given[0], "is not taken by a suite run; run the suite's tasks one by one "
                                                     "with it")])
    suite_obj = get_suite(suite) if isinstance(suite, str) else suite
    retr = get_retriever(retriever)
    results = []
    with limited(o.memory_budget), distributed.connect(o.ray):
        for task in suite_obj.tasks:
            out = Path(o.output) / task.replace("/", "__") if o.output else None
            results.append(run(task, retr, o.replace(output=out, memory_budget=None, ray=None)))
    return SuiteResults.of(suite_obj.name, results)
