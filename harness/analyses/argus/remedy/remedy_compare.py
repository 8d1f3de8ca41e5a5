"""With and without ARGUS: Original, Document Expansion and LLM Synthesis indexing of one task (or every task of a
suite) with the same retriever for embedding, diagnosis and ranking (Taghavi et al., "With Argus Eyes", section 6).

    cmp = gapbench.argus_compare("impliret/multispeaker/wknow", "bm25", ArgusCompareOptions(output="out/"))
    print(cmp)

Per task: the Original run; one diagnosis (:func:`.diagnosis.diagnose`: NER, then by default the
probe bound to the retriever's fingerprint, else an exact RPS audit of the mentioned entities with the retriever itself;
the label-prior heuristic only with ``diagnosis="label-prior"``); the Reference KB (default ``wikipedia-slice``, the
audit slice's 620 Wikipedia first paragraphs; ``landmarks-oracle`` states the ImpliRet wknow answers and is marked as a
pipeline check wherever it is used) looked up once; Expansion and Synthesis views indexed beside the originals through
the :class:`~.views.Augmented` (views collapse onto their source by maximum score, so qrels and
measures stay on original ids); evaluation (default nDCG@5/10/20/50 and R@5/10/20/50/100) and paired tests of every
variant pair (:func:`gapbench.evaluation.comparison.compare`: randomization test and t-test, Holm). Synthesis asks the
LLM at ``llm_base_url``/``llm_model``. With no endpoint configured and no ``variants`` asked for, only Original and
Expansion run, and a note says how to add Synthesis; asked for without an endpoint, it runs on the embedded llama.cpp
server, as every LLM command does (:func:`.augment.synthesis_client`), after an estimate of its calls, tokens and
minutes. A suite adds the Full Benchmark Avg. (the unweighted mean over its tasks) per variant.

The result is :class:`ArgusComparison`: the model :class:`gapbench.schemas.ArgusCompare` of ``argus_compare.json``
(its fields and JSON Schema, docs/schemas/argus_compare.schema.json) with the Markdown rendering and, for a comparison
run in this process, each variant's per-query results (:meth:`ArgusComparison.results`). ``tasks.TASK.max_rps_delta``
is Table 4 / appendix E.1 on the Original run (:func:`table4`): for K in 10, 20, 50 (those within the retrieval depth),
each (query, gold document) pair is retrieved or not in the top K, and the statistic is the mean largest predicted RPS
among the gold document's entities, retrieved minus unretrieved, from the same diagnosis that flags entities (an
entity's RPS is its lowest mention's, as flagging reads it). A file written before it has no key. The files
(:func:`write_outputs`): ``argus_compare.json``, ``argus_compare.md`` (tables) and ``argus_compare.png`` (nDCG@k per
variant, the first task or the suite mean).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, ValidationInfo, field_validator

from ....contract import Depth, Options, Seed, Text
from ....errors import ConfigError
from ....progress import say
from ....schemas.argus_compare import (
    ArgusCompareTask,
    CompareConfig,
    CompareDiagnosis,
    CompareVariant,
    MaxRpsDelta,
    Variant,
    VariantDelta,
)
from ..probe.probe_metrics import max_rps_delta
from .augment import synthesis_client
from .compare_report import (
    KIND,
    ArgusComparison,
    average_table,
    comparison_markdown,
    plot,
    read_outputs,
    variant_table,
    write_outputs,
)
from .diagnosis import DEFAULT_TAU, diagnose, entity_rps
from .kb import DEFAULT_K_AUG, DEFAULT_KB, ORACLE_KBS, PIPELINE_CHECK_NOTE, ReferenceKB
from .ner import SPACY_DEFAULT
from .probe_binding import diagnosis_for, mention_scorer
from .views import Augmented, expansion_views, kb_hits, synthesis_note, synthesis_views, view_stats

if TYPE_CHECKING:
    from ....schemas.run import RunResults

__all__ = ["ArgusCompareOptions", "ArgusComparison", "argus_compare", "compare_task",
           "comparison_markdown", "read_outputs", "table4", "write_outputs", "average_table",
           "variant_table", "plot", "KIND"]

VARIANTS: tuple[Variant, ...] = ("original", "expansion", "synthesis")
DEFAULT_MEASURES = ("nDCG@5", "nDCG@10", "nDCG@20", "nDCG@50", "R@5", "R@10", "R@20", "R@50", "R@100")
TABLE4_KS = (10, 20, 50)  # the cut-offs of the paper's Table 4
NO_ENDPOINT_VARIANTS: tuple[Variant, ...] = ("original", "expansion")
ALPHA = 0.05  # a delta is significant when its Holm-corrected randomization p is below this
# said by the command when Synthesis is left out (a full command line may name its flags)
SYNTHESIS_SKIPPED = ("Synthesis was skipped: no LLM endpoint is configured, so only Original and Expansion ran. To "
                     "add it, give an endpoint (--llm-base-url URL --llm-model NAME, or $OPENAI_BASE_URL), or ask for "
                     "it on the embedded SmolLM2 with --variants original,expansion,synthesis (slow on a CPU: an "
                     "estimate is printed before it starts).")
SYNTH_TEST_SERVER_NOTE = ("Synthesis numbers from the local test LLM server (deterministic 'echo <digest>' answers) "
                          "are not meaningful quality numbers: they measure an index with junk views.")


class ArgusCompareOptions(Options):
    """Every setting of an ARGUS comparison but the task and the retriever, checked when built (an
    :class:`~gapbench.errors.OptionsError` names the field). Example::

        cmp = gapbench.argus_compare("impliret/multispeaker/wknow", "bm25",
                                     ArgusCompareOptions(variants=("original", "expansion"), output="out/"))
    """

    # each field's docstring is its description (the command line's help: gapbench.cli.from_options)
    model_config = ConfigDict(use_attribute_docstrings=True)

    diagnosis: Literal["auto", "probe", "audit", "label-prior"] = "auto"
    """``auto``: the probe given or bound to the retriever, else an exact RPS audit with the retriever; ``probe``: the
    same, but an error without a probe; ``audit``; ``label-prior``: FAC/GPE/LOC/ORG mentions flagged (no probe)."""
    probe: Any = None
    """A probe saved by ``gapbench argus probe`` (its folder), or a probe object (``predict(embeddings)``); None: the
    probe bound to the retriever's fingerprint, if any (``diagnosis="auto"``)."""
    kb: str | ReferenceKB = DEFAULT_KB
    """The Reference KB: a packaged name (``wikipedia-slice``, the default; ``landmarks-oracle`` states ImpliRet's
    wknow answers, a pipeline check), a JSONL file (:mod:`gapbench.analyses.argus.remedy.kb` says its records) or a
    :class:`~gapbench.analyses.argus.remedy.kb.ReferenceKB`."""
    tau: float = DEFAULT_TAU
    """Entities whose predicted RPS (a hit rate) is below this are flagged; 0 < tau <= 1 (the paper uses 0.3)."""
    k_aug: int = DEFAULT_K_AUG
    """KB passages per flagged entity (the paper uses 2)."""
    ner: str = SPACY_DEFAULT
    """``spacy`` (offline default), ``auto`` (the paper's dslim/bert-base-NER when it is on disk, a folder or in the HF
    cache; else spacy) or a transformers NER model name or folder."""
    variants: tuple[Variant, ...] | None = None
    """The indexings to compare, always with ``original``; None: all three with an LLM endpoint (or ``llm``,
    ``llm_model``) given, else Original and Expansion (Synthesis on the embedded model is slow: ask for it by name)."""
    measures: tuple[str, ...] = DEFAULT_MEASURES
    """Measures as ir-measures names them."""
    k: Depth = 100
    """Documents retrieved per query (the retrieval depth)."""
    seed: Seed = 0
    """Seed of the query sample, the bootstrap and the paired tests."""
    llm_base_url: Text | None = None
    """OpenAI-compatible endpoint for Synthesis; None: ``$OPENAI_BASE_URL``, else the embedded LLM."""
    llm_model: Text | None = None
    """Model for Synthesis, as the endpoint names it (or a .gguf file for the embedded LLM; default SmolLM2)."""
    llm: Any = None
    """An LLM client (:class:`gapbench.llm.client.LLMClient`) for Synthesis, instead of an endpoint (Python only)."""
    output: Path | None = None
    """Write ``argus_compare.json``, ``.md`` and ``.png`` into this folder."""

    @field_validator("tau")
    @classmethod
    def _tau(cls, value: float) -> float:
        if not 0.0 < value <= 1.0:
            raise ValueError("must be a predicted RPS (a hit rate): 0 < tau <= 1 (the paper uses 0.3)")
        return value

    @field_validator("k_aug")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be at least 1")
        return value

    @field_validator("ner")
    @classmethod
    def _ner(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be 'spacy', 'auto' or a transformers NER model name or folder")
        return value

    @field_validator("kb", mode="before")
    @classmethod
    def _kb(cls, value: Any) -> Any:
        if isinstance(value, ReferenceKB):
            return value
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if not isinstance(value, str) or not value.strip():
            raise ValueError("must be a packaged KB name (wikipedia-slice, landmarks-oracle), a JSONL file or a "
                             "ReferenceKB")
        return value

    @field_validator("probe", mode="before")
    @classmethod
    def _probe(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        if info.data.get("diagnosis") in ("audit", "label-prior"):
            raise ValueError(f"must be left out: diagnosis {info.data['diagnosis']!r} uses no probe (or use diagnosis "
                             "'probe')")
        if isinstance(value, Path) or callable(getattr(value, "predict", None)):
            return value
        if isinstance(value, (str, os.PathLike)):
            return Path(value)
        raise ValueError("must be a probe folder saved by `gapbench argus probe`, or an object with predict()")

    @field_validator("variants", mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ValueError("must be a list of variant names, e.g. ('original', 'expansion')")
        value = tuple(dict.fromkeys(value))
        if "original" not in value:
            raise ValueError(f"must include original (the comparison's baseline); choose from {', '.join(VARIANTS)}, "
                             f"got {list(value)}")
        return value

    @field_validator("measures", mode="before")
    @classmethod
    def _measures(cls, value: Any) -> Any:
        from ....evaluation.evaluation import parse_measures

        if value is None:
            return DEFAULT_MEASURES
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ValueError("must be a list of measure names, e.g. ('nDCG@10', 'R@100')")
        try:
            parse_measures(list(value))
        except ConfigError as exc:
            raise ValueError(f"must be measure names ir-measures reads; {str(exc).rstrip('.')}") from None
        return tuple(value)

    @field_validator("output", mode="before")
    @classmethod
    def _output(cls, value: Any) -> Any:
        return Path(value) if isinstance(value, (str, os.PathLike)) else value


def argus_compare(task: str, retriever: str | Any, options: ArgusCompareOptions | None = None,
                  **settings: Any) -> ArgusComparison:
    """Original vs ARGUS Expansion (and Synthesis with an LLM) on a task or a suite, with one retriever (a spec or an
    object) for embedding, diagnosis and ranking; writes the files when ``options.output`` is set. The settings are
    :class:`ArgusCompareOptions`' (``options``, or keywords: ``argus_compare(task, "bm25", k_aug=2)``)."""
    options = ArgusCompareOptions.of(options, settings)
    from ....retrieval import fingerprint_of, get_retriever

    retr = get_retriever(retriever)
    spec = retriever if isinstance(retriever, str) else getattr(retr, "name", type(retr).__name__)
    method, probe_obj, probe_source = diagnosis_for(options.diagnosis, retr, options.probe)
    kb_obj = ReferenceKB.resolve(options.kb)
    llm = options.llm
    variants, skipped = _variants(options)
    if skipped:
        say(SYNTHESIS_SKIPPED)
    if llm is None and "synthesis" in variants:
        llm = _synthesis_llm(options.llm_base_url, options.llm_model)
    resolved = options.replace(probe=probe_obj, kb=kb_obj, llm=llm, diagnosis=method, variants=variants)
    names, suite = _tasks_of(task)
    done = [compare_task(t, retr, resolved) for t in names]
    config = {"tau": options.tau, "k_aug": options.k_aug, "ner": options.ner, "kb": kb_obj.name,
              "kb_fingerprint": kb_obj.fingerprint, "pipeline_check": kb_obj.name in ORACLE_KBS, "k": options.k,
              "measures": list(options.measures), "seed": options.seed, "diagnosis": options.diagnosis,
              "diagnosis_method": method, "probe": probe_source, "retriever_fingerprint": fingerprint_of(retr),
              "llm": llm.describe() if llm is not None and hasattr(llm, "describe") else None,
              "variants": list(variants)}
    tasks = {name: row for name, row, _ in done}
    result = ArgusComparison(
        kind=KIND, task=suite or done[0][0], version=1, suite=suite, retriever=spec,
        config=CompareConfig.model_validate(config), tasks=tasks,
        full_benchmark_avg=_full_benchmark_avg(tasks), notes=_notes(config, llm) + ([SYNTHESIS_SKIPPED] if skipped
                                                                                      else []))
    result.keep_results({name: results for name, _, results in done})
    if options.output is not None:
        write_outputs(result, options.output)
    return result


def _full_benchmark_avg(tasks: Mapping[str, ArgusCompareTask]) -> dict[Variant, dict[str, float]]:
    """Per variant every task ran, the unweighted mean over the tasks of each measure."""
    rows = list(tasks.values())
    out: dict[Variant, dict[str, float]] = {}
    for v in VARIANTS:
        if all(v in t.variants for t in rows):
            out[v] = {m: sum(t.variants[v].means[m] for t in rows) / len(rows) for m in rows[0].variants[v].means}
    return out


def _tasks_of(task: str) -> tuple[list[str], str | None]:
    from ....suites import get_suite, is_suite

    if is_suite(task):
        return list(get_suite(task).tasks), task
    return [task], None


def _synthesis(corpus: Any, diag: Any, kb: ReferenceKB, llm: Any, k_aug: int,
               hits: Mapping[str, Mapping[str, Sequence[str]]]) -> tuple[list[Any], float, dict[str, int]]:
    """The synthesis views, the seconds they took and the LLM usage they added (requests, tokens, cache hits)."""
    before = llm.usage.total()
    t0 = time.perf_counter()
    views = synthesis_views(corpus, diag, kb, llm, k_aug, hits=hits)
    seconds = time.perf_counter() - t0
    after = llm.usage.total()
    return views, seconds, {key: after[key] - before[key] for key in after if isinstance(after[key], int)}


def table4(run: Any, qrels: Any, diag: Any, depth: int, ks: Sequence[int] = TABLE4_KS) -> dict[int, dict]:
    """Table 4 / appendix E.1 for one run: :func:`~..probe.probe_metrics.max_rps_delta` at each k in ``ks``
    within the run's retrieval ``depth`` (a deeper cut-off would count documents past the depth as unretrieved)."""
    rps = entity_rps(diag)
    return {k: max_rps_delta(run, qrels, rps, k) for k in ks if k <= depth}


def _deltas(results: Mapping[Variant, RunResults], comparison: Any) -> dict[Variant, dict[str, VariantDelta]]:
    """Every variant but Original: per measure, its delta vs Original and the Holm-corrected paired tests."""
    out: dict[Variant, dict[str, VariantDelta]] = {}
    for v, res in results.items():
        if v == "original":
            continue
        out[v] = {}
        for m in res.measures:
            t = comparison.test(m, v, "original")
            out[v][m] = VariantDelta(delta=res.means[m] - results["original"].means[m],
                                     p_randomization_holm=t.p_randomization_holm, p_ttest_holm=t.p_ttest_holm,
                                     significant=t.p_randomization_holm < ALPHA)
    return out


def compare_task(task: str, retriever: Any,
                 options: ArgusCompareOptions) -> tuple[str, ArgusCompareTask, dict[Variant, RunResults]]:
    """Original vs ARGUS variants on one task, with one retriever object for embedding, diagnosis and ranking:
    ``(task name, its ArgusCompareTask, variant -> evaluation results)``.

    ``options`` come resolved by :func:`argus_compare`: ``kb`` a :class:`ReferenceKB`, ``probe`` an object (it scores
    the mentions when given) or None, ``diagnosis`` a method of :func:`.probe_binding.diagnosis_for` (``audit`` or
    ``label-prior``) for when it is None, ``variants`` set, ``llm`` the synthesis client or None."""
    from ....evaluation.comparison import compare
    from ....evaluation.evaluation import evaluate
    from ....pipeline import prepare

    # the prepared queries carry the task's instruction, as `gapbench run` searches them
    probe, llm, k_aug, k, seed = options.probe, options.llm, options.k_aug, options.k, options.seed
    kb_obj = ReferenceKB.resolve(options.kb)  # resolved already: the object itself
    asked = options.variants if options.variants is not None else _variants(options)[0]
    prepared = prepare(task, seed=seed)
    data, name = prepared.data, prepared.task.name
    notes: list[str] = []
    results: dict[Variant, RunResults] = {}
    variants: dict[Variant, dict[str, Any]] = {}
    runs: dict[Variant, Any] = {}

    def run_variant(label: Variant, retr: Any, augment_s: float, views: Sequence[Any] = ()) -> None:
        t0 = time.perf_counter()
        retr.index(data.corpus)
        t1 = time.perf_counter()
        run = runs[label] = prepared.search(retr, k).renamed(label)
        t2 = time.perf_counter()
        res = results[label] = evaluate(run, data.qrels, list(options.measures), task=name, seed=seed)
        variants[label] = {"means": {m: res.means[m] for m in res.measures},
                           "ci95": {m: list(res.ci[m]) for m in res.measures},
                           "growth": view_stats(data.corpus, views),
                           "seconds": {"augment": augment_s, "index": t1 - t0, "search": t2 - t1}}

    run_variant("original", retriever, 0.0)
    scorer = None if probe is not None else mention_scorer(options.diagnosis, retriever, data.corpus, kb_obj, k_aug)
    diag = diagnose(data.corpus, retriever, probe=probe, tau=options.tau, ner=options.ner, fallback=scorer)
    rps_delta = table4(runs["original"], data.qrels, diag, k)
    t0 = time.perf_counter()
    hits = kb_hits(diag, kb_obj, k_aug)
    kb_s = time.perf_counter() - t0
    n_hit = sum(len(v) for v in hits.values())
    if kb_obj.name in ORACLE_KBS:
        notes.append(PIPELINE_CHECK_NOTE)
    notes.append(f"{n_hit} of {diag.stats()['n_flagged_entities']} flagged entities found KB passages "
                 f"(BM25 score > 0 in {kb_obj.name}, {len(kb_obj.passages)} passages).")
    llm_usage: dict[str, int] | None = None
    if "expansion" in asked:
        t0 = time.perf_counter()
        views = expansion_views(data.corpus, diag, kb_obj, k_aug, hits=hits)
        run_variant("expansion", Augmented(retriever, views, name="expansion"), time.perf_counter() - t0, views)
    if "synthesis" in asked:
        if llm is None:
            notes.append("synthesis skipped: no LLM client given (llm=...).")
        else:
            views, aug_s, llm_usage = _synthesis(data.corpus, diag, kb_obj, llm, k_aug, hits)
            run_variant("synthesis", Augmented(retriever, views, name="synthesis"), aug_s, views)
            cut = synthesis_note(variants["synthesis"]["growth"].get("synthesis"))
            if cut:
                notes.append(cut)
    row = ArgusCompareTask(
        n_queries=results["original"].n_queries, diagnosis=CompareDiagnosis.model_validate(diag.stats()),
        kb_seconds=kb_s, variants={v: CompareVariant.model_validate(d) for v, d in variants.items()},
        deltas=_deltas(results, compare(list(results.values()), seed=seed)),
        max_rps_delta={str(cut): MaxRpsDelta.model_validate(d) for cut, d in rps_delta.items()}, llm=llm_usage,
        notes=notes)
    return name, row, results


def _synthesis_llm(llm_base_url: str | None, llm_model: str | None) -> Any:
    # no endpoint given: the embedded LLM, as `gapbench gap` gets its verifier; a config problem (the local-llm extra
    # missing, a model without endpoint) also names the way to compare without synthesis
    try:
        return synthesis_client(llm_base_url, llm_model)
    except ConfigError as exc:
        raise ConfigError(f"{exc} To compare without synthesis, give variants=('original', 'expansion').") from None


def endpoint_configured(llm_base_url: str | None = None) -> bool:
    """Whether an LLM endpoint is configured: given, or ``$OPENAI_BASE_URL``, or ``$OPENAI_API_KEY`` (OpenAI's own), as
    :meth:`gapbench.llm.client.LLMConfig.resolved` decides; without one LLM work goes to the embedded server."""
    from ....llm.client import LLMConfig

    return bool(llm_base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get(LLMConfig.api_key_env))


def _variants(options: ArgusCompareOptions) -> tuple[tuple[Variant, ...], bool]:
    """The variants to run, and whether Synthesis was left out for want of an endpoint. Asked for (``variants``), they
    run as asked (Synthesis without an endpoint on the embedded model); not asked for, Synthesis runs only with an
    LLM client, an endpoint or a model (e.g. a GGUF file for the embedded server) given."""
    if options.variants is not None:
        return tuple(options.variants), False
    if options.llm is not None or options.llm_model or endpoint_configured(options.llm_base_url):
        return VARIANTS, False
    return NO_ENDPOINT_VARIANTS, True


def _notes(config: Mapping[str, Any], llm: Any) -> list[str]:
    """The comparison's notes: the KB's role, how entities were flagged, what the synthesis LLM was."""
    notes = [PIPELINE_CHECK_NOTE] if config["pipeline_check"] else []
    method = config["diagnosis_method"]
    if method == "label-prior":
        notes.append("Diagnosis by the label-prior heuristic (diagnosis label-prior): NER labels FAC, GPE, LOC, ORG "
                     "count as high-risk (RPS 0), every other entity RPS 1; no probe, no audit.")
    elif method == "audit":
        notes.append("No probe is bound to this retriever: entities were flagged by an exact RPS audit with the "
                     "retriever itself (queries: each entity's top k_aug KB passages without its name; targets: the "
                     "documents that mention it; neutrals: the other documents), not by a probe's prediction.")
    if llm is not None and "synthesis" in config["variants"]:
        notes.append("Synthesis views come from the LLM named in config.llm; with the local test server "
                     "(tests/llm_server.py) they are echoes. " + SYNTH_TEST_SERVER_NOTE)
    return notes
