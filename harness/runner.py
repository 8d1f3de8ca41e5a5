"""``gapbench.run(task, retriever)``: load, index, search (exclusions masked), evaluate, record."""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import distributed
from .budget import limited
from .budget import memory_budget as memory_budget_bytes
from .evaluation.evaluation import Results, evaluate, format_table
from .pipeline import Prepared, prepare
from .retrieval import config_of, fingerprint_of, get_retriever, llm_manifest_of
from .store import RunDirWriter, check_replace, package_versions, save_run_dir, utc_now
from .suites import Suite, get_suite
from .task import Task, get_task
from .types import Run, TaskData


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` returns: the Run, its Results and the manifest that records how they were made."""

    run: Run
    results: Results
    manifest: dict = field(repr=False)
    output: Path | None = None

    def __str__(self) -> str:
        return str(self.results)

    def to_dict(self) -> dict:
        return self.results.to_dict()


def run(
    task: str | Task,
    retriever: str | Any,
    *,
    measures: Iterable[str] | None = None,
    k: int = 1000,
    output: str | Path | None = None,
    seed: int = 0,
    reranker: str | Any | None = None,
    llm_base_url: str | None = None,
    llm_model: str | None = None,
    augment: str | None = None,
    memory_budget: int | str | None = None,
    ray: str | None = None,
    overwrite: bool = False,
) -> RunResult:
    """Run a retriever on a task and evaluate it.

    >>> result = gapbench.run("impliret/multispeaker/wknow", "bm25")  # doctest: +SKIP
    >>> result.results.means["nDCG@10"]  # doctest: +SKIP

    ``memory_budget`` (bytes, or a size such as ``"4GB"``) bounds the working memory of the large-corpus paths for
    the whole run (see :mod:`gapbench.budget`) and is recorded in the manifest. With ``output``, run.trec.gz is written
    batch by batch as the queries are searched (unless a reranker reorders the run afterwards). ``ray`` (``"local"``,
    ``"auto"`` or a cluster address) runs it on Ray: dense encoding and large searches spread over the cluster's
    workers (see :mod:`gapbench.distributed`); the manifest records the address kind and the workers used.
    An ``output`` that holds a run of another task or retriever is refused before any work
    (:class:`gapbench.store.RunDirInUse`) unless ``overwrite``; a run of the same task and retriever is replaced.
    """
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
        timings = {}
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
            # Without a reranker the run searched is the run kept, so it is written as it is produced.
            writer = stack.enter_context(RunDirWriter(output)) if output and rr is None else None
            result_run = _search(retr, prepared, k, writer)
        rerank_info = None
        if rr is not None:
            with _timed(timings, "rerank_s"):
                result_run = rr.rerank(queries, result_run, data.corpus)
            rerank_info = _rerank_entry(rr, applied)
            name = result_run.name
        results = evaluate(result_run, data.qrels, measures, task=task_obj.name, seed=seed)
        manifest = _manifest(prepared, retr, name, results, k=k, seed=seed, reranker=rerank_info,
                             augment=augment_info, timings=timings)
        if writer is not None:
            out = writer.finish(results, manifest)
        else:
            out = save_run_dir(output, result_run, results, manifest) if output else None
    return RunResult(result_run, results, manifest, out)


def _identity(prepared: Prepared, retr: Any, rr: Any, augment: str | None) -> dict:
    """The :func:`gapbench.store.run_identity` of the run about to be made."""
    return {"task": prepared.task.name, "revision": prepared.task.revision, "corpus": prepared.data.corpus.fingerprint,
            "queries": prepared.queries.fingerprint, "qrels": prepared.data.qrels.fingerprint,
            "retriever": getattr(retr, "name", None) or type(retr).__name__,
            "fingerprint": fingerprint_of(retr), "reranker": getattr(rr, "name", type(rr).__name__) if rr else None,
            "augment": augment or None}


@contextmanager
def _timed(timings: dict, key: str) -> Iterator[None]:
    """Record the seconds the block took as ``timings[key]`` (rounded as the manifest keeps them)."""
    t0 = time.perf_counter()
    yield
    timings[key] = round(time.perf_counter() - t0, 4)


def _reranker(spec: str | Any, task: Task, llm_base_url: str | None, llm_model: str | None) -> tuple[Any, dict]:
    """(the reranker, the task's defaults it took): a reranker named by a spec takes the task's defaults for it
    (OBLIQ's tournament settings), as gapbench gap takes them."""
    from .retrieval import get_reranker, with_task_defaults

    spec, applied = with_task_defaults(spec, task.reranker_defaults)
    return get_reranker(spec, llm_base_url=llm_base_url, llm_model=llm_model), applied


def _augmented(retr: Any, augment: str, data: TaskData, llm_base_url: str | None,
               llm_model: str | None) -> tuple[Any, dict]:
    """(the retriever over the augmented corpus, what the augmenter records), through the RUN_AUGMENTERS registry."""
    from .options import parse_spec
    from .retrieval import RUN_AUGMENTERS

    augment_with = RUN_AUGMENTERS.get(parse_spec(augment, "augmenter")[0])
    return augment_with(augment, retr, data.corpus, llm_base_url=llm_base_url, llm_model=llm_model)


def _rerank_entry(rr: Any, applied: dict) -> dict:
    """The manifest's ``reranker``: name, config, task defaults used, and the LLM's settings and answers if any."""
    entry = {"name": getattr(rr, "name", type(rr).__name__), "config": config_of(rr), "task_defaults": applied}
    llm = llm_manifest_of(rr)
    if llm is not None:
        entry["llm"] = llm
    if hasattr(rr, "answers"):  # how the model's answers were read: clean, repaired, re-asked, fallback
        entry["answers"] = rr.answers
    return entry


def _manifest(prepared: Prepared, retr: Any, name: str, results: Results, *, k: int, seed: int,
              reranker: dict | None, augment: dict | None, timings: dict) -> dict:
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
    }


def _search(retr: Any, prepared: Prepared, k: int, writer: RunDirWriter | None) -> Run:
    """Search in batches; each batch is checked against the corpus and, given a writer, appended to run.trec.gz."""
    if writer is None:
        return prepared.search(retr, k)
    with writer.run_file() as append:
        return prepared.search(retr, k, on_batch=append)


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    results: tuple  # RunResult per task, in suite order
    measures: tuple[str, ...] = field(default=())

    @property
    def average(self) -> dict[str, float]:
        """Full Benchmark Avg.: the unweighted mean over the suite's tasks, per measure."""
        out = {}
        for m in self.measures:
            vals = [r.results.means[m] for r in self.results if m in r.results.means]
            if len(vals) == len(self.results):
                out[m] = sum(vals) / len(vals)
        return out

    def to_dict(self) -> dict:
        return {
            "suite": self.suite.name,
            "system": self.results[0].results.system if self.results else "",
            "tasks": {r.results.task: {m: r.results.means[m] for m in r.results.measures} for r in self.results},
            "full_benchmark_avg": self.average,
        }

    def __str__(self) -> str:
        rows = [[r.results.task, *[f"{r.results.means.get(m, float('nan')):.4f}" for m in self.measures]] for r in self.results]
        avg = self.average
        rows.append(["Full Benchmark Avg.", *[f"{avg[m]:.4f}" if m in avg else "-" for m in self.measures]])
        return f"suite {self.suite.name}\n" + format_table(["task", *self.measures], rows)



def run_suite(
    suite: str | Suite, retriever: str | Any, *, measures: Iterable[str] | None = None, k: int = 1000,
    output: str | Path | None = None, seed: int = 0, overwrite: bool = False,
) -> SuiteResult:
    """Run one retriever over every task of a suite; with ``output`` each task gets ``output/<task name>`` (a run of
    another retriever there is refused unless ``overwrite``, as :func:`run` does)."""
    suite_obj = get_suite(suite) if isinstance(suite, str) else suite
    retr = get_retriever(retriever)
    results = []
    for task in suite_obj.tasks:
        out = Path(output) / task.replace("/", "__") if output else None
        results.append(run(task, retr, measures=measures, k=k, output=out, seed=seed, overwrite=overwrite))
    common = [m for m in results[0].results.measures if all(m in r.results.measures for r in results)]
    return SuiteResult(suite_obj, tuple(results), tuple(common))

