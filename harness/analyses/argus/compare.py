"""With and without ARGUS: Original, Document Expansion and LLM Synthesis indexing of one task (or every task of a
suite) with the same retriever for embedding, diagnosis and ranking (Taghavi et al., "With Argus Eyes", section 6).

    cmp = compare_argus("impliret/multispeaker/wknow", "bm25", llm_base_url=URL, llm_model="m", output="out/")
    print(cmp)

Per task: the Original run; one diagnosis (:func:`gapbench.analyses.argus.augment.diagnose`: NER, then by default the
probe bound to the retriever's fingerprint, else an exact RPS audit of the mentioned entities with the retriever itself;
the label-prior heuristic only with ``diagnosis="label-prior"``); the Reference KB (default ``wikipedia-slice``, the
audit slice's 620 Wikipedia first paragraphs; ``landmarks-oracle`` states the ImpliRet wknow answers and is marked as a
pipeline check wherever it is used) looked up once; Expansion and Synthesis views
indexed beside the originals through :class:`~gapbench.analyses.argus.augment.Augmented` (views collapse onto their source by
maximum score, so qrels and measures stay on original ids); evaluation (default nDCG@5/10/20/50 and R@5/10/20/50/100)
and paired tests of every variant pair (:func:`gapbench.evaluation.comparison.compare`: randomization test and t-test, Holm).
Synthesis asks the LLM at ``llm_base_url``/``llm_model`` (``--llm-base-url``/``--llm-model``). With no endpoint
configured and no ``variants`` asked for, only Original and Expansion run, and a note says how to add Synthesis; asked
for without an endpoint, it runs on the embedded llama.cpp server, as every LLM command does
(:func:`.augment.synthesis_client`), after an estimate of its calls, tokens and minutes. A suite adds
the Full Benchmark Avg. (the unweighted mean over its tasks) per variant.

Output (``write_outputs``) ``argus_compare.json``::

    {"kind": "argus_compare", "task": TASK_OR_SUITE, "version": 1, "suite": NAME | null, "retriever": SPEC,
     "config": {"tau", "k_aug", "ner", "kb", "kb_fingerprint", "pipeline_check", "k", "measures", "seed",
                "diagnosis" (asked), "diagnosis_method" (used), "probe" (its folder, or null), "llm", "variants"},
     "tasks": {TASK: {"n_queries", "diagnosis": {"n_docs", "n_mentions", "n_flagged_entities", "n_docs_flagged",
                                                 "tau", "method": {...}, "seconds": {"ner", "embed", "probe", "audit"}},
                      "kb_seconds",
                      "variants": {VARIANT: {"means": {M: v}, "ci95": {M: [lo, hi]},
                                             "growth": {"n_docs", "n_views", "indexed", "views_per_doc",
                                                        "docs_with_views", "max_views_per_doc", "index_growth"},
                                             "seconds": {"augment", "index", "search"}}},
                      "deltas": {VARIANT: {M: {"delta", "p_randomization_holm", "p_ttest_holm", "significant"}}},
                      "max_rps_delta": {K: {"k", "no_entities", "retrieved": {"n", "mean_max_rps"},
                                            "unretrieved": {"n", "mean_max_rps"}, "delta"}},
                      "llm": USAGE | null, "notes": [...]}},
     "full_benchmark_avg": {VARIANT: {M: mean over tasks}},
     "notes": [...]}

``max_rps_delta`` is Table 4 / appendix E.1 on the Original run (:func:`table4`): for K in 10, 20, 50 (those within
the retrieval depth), each (query, gold document) pair is retrieved or not in the top K, and the statistic is the mean
largest predicted RPS among the gold document's entities, retrieved minus unretrieved, from the same diagnosis that
flags entities (an entity's RPS is its lowest mention's, as flagging reads it). A file written before it has no key.

plus ``argus_compare.md`` (tables) and ``argus_compare.png`` (nDCG@k per variant, the first task or the suite mean).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .augment import (DEFAULT_K_AUG, DEFAULT_KB, DEFAULT_TAU, ORACLE_KBS, PIPELINE_CHECK_NOTE, SPACY_DEFAULT,
                      Augmented, ReferenceKB, diagnose, diagnosis_for, entity_rps, expansion_views, kb_hits,
                      mention_scorer, synthesis_client, synthesis_note, synthesis_views, view_stats)
from .probe import max_rps_delta, max_rps_table
from ...errors import ConfigError, GapbenchError
from ...files import output_folder, write_figure, write_text_atomic
from ...progress import say
from ...tables import Table

KIND = "argus_compare"
VARIANTS = ("original", "expansion", "synthesis")
DEFAULT_MEASURES = ("nDCG@5", "nDCG@10", "nDCG@20", "nDCG@50", "R@5", "R@10", "R@20", "R@50", "R@100")
TABLE4_KS = (10, 20, 50)  # the cut-offs of the paper's Table 4
NO_ENDPOINT_VARIANTS = ("original", "expansion")
SYNTHESIS_SKIPPED = ("Synthesis was skipped: no LLM endpoint is configured, so only Original and Expansion ran. To "
                     "add it, give an endpoint (--llm-base-url URL --llm-model NAME, or $OPENAI_BASE_URL), or ask for "
                     "it on the embedded SmolLM2 with --variants original,expansion,synthesis (slow on a CPU: an "
                     "estimate is printed before it starts).")
SYNTH_TEST_SERVER_NOTE = ("Synthesis numbers from the local test LLM server (deterministic 'echo <digest>' answers) "
                          "are not meaningful quality numbers: they measure an index with junk views.")


@dataclass
class TaskComparison:
    task: str
    results: dict  # variant -> Results
    comparison: Any  # gapbench.evaluation.comparison.Comparison
    diagnosis: dict
    growth: dict
    seconds: dict
    kb_seconds: float
    llm: dict | None
    notes: list[str] = field(default_factory=list)
    max_rps_delta: dict = field(default_factory=dict)  # k -> max_rps_delta(...) on the Original run

    def deltas(self, alpha: float = 0.05) -> dict:
        out: dict[str, dict] = {}
        for v in self.results:
            if v == "original":
                continue
            row = {}
            for m in self.results[v].measures:
                t = self.comparison.test(m, v, "original")
                delta = self.results[v].means[m] - self.results["original"].means[m]
                row[m] = {"delta": delta, "p_randomization_holm": t.p_randomization_holm,
                          "p_ttest_holm": t.p_ttest_holm, "significant": t.p_randomization_holm < alpha}
            out[v] = row
        return out

    def to_dict(self) -> dict:
        first = next(iter(self.results.values()))
        return {
            "n_queries": first.n_queries, "diagnosis": self.diagnosis, "kb_seconds": self.kb_seconds,
            "variants": {v: {"means": {m: r.means[m] for m in r.measures},
                             "ci95": {m: list(r.ci[m]) for m in r.measures},
                             "growth": self.growth[v], "seconds": self.seconds[v]} for v, r in self.results.items()},
            "deltas": self.deltas(), "max_rps_delta": {str(k): d for k, d in self.max_rps_delta.items()},
            "llm": self.llm, "notes": list(self.notes),
        }


@dataclass
class ArgusComparison:
    name: str
    retriever: str
    tasks: list[TaskComparison]
    config: dict
    suite: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def variants(self) -> list[str]:
        return [v for v in VARIANTS if all(v in t.results for t in self.tasks)]

    def full_benchmark_avg(self) -> dict[str, dict[str, float]]:
        out = {}
        for v in self.variants:
            ms = self.tasks[0].results[v].measures
            out[v] = {m: sum(t.results[v].means[m] for t in self.tasks) / len(self.tasks) for m in ms}
        return out

    def to_dict(self) -> dict:
        return {"kind": KIND, "task": self.name, "version": 1, "suite": self.suite, "retriever": self.retriever,
                "config": self.config, "tasks": {t.task: t.to_dict() for t in self.tasks},
                "full_benchmark_avg": self.full_benchmark_avg(), "notes": list(self.notes)}

    def markdown(self) -> str:
        return comparison_markdown(self.to_dict())

    def __str__(self) -> str:
        return self.markdown()


def _fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _variant_cell(t: Mapping[str, Any], v: str, m: str) -> str:
    cell = f"{100 * t['variants'][v]['means'][m]:.2f}"
    if v == "original":
        return cell
    dl = t["deltas"][v][m]
    return cell + f" ({100 * dl['delta']:+.2f}{'*' if dl['significant'] else ''})"


def variant_table(t: Mapping[str, Any]) -> Table:
    """One task's variants: each measure x100 with its delta vs original (``*`` significant), views/doc, indexed."""
    measures = list(t["variants"]["original"]["means"])
    rows = [[v, *(_variant_cell(t, v, m) for m in measures), f"{row['growth']['views_per_doc']:.2f}",
             str(row["growth"]["indexed"])] for v, row in t["variants"].items()]
    return Table(["variant", *measures, "views/doc", "indexed"], rows, align="l" * (len(measures) + 3))


def average_table(fba: Mapping[str, Mapping[str, float]]) -> Table:
    """The Full Benchmark Avg.: one row per variant, each measure x100."""
    measures = list(next(iter(fba.values())))
    rows = [[v, *(f"{100 * row[m]:.2f}" for m in measures)] for v, row in fba.items()]
    return Table(["variant", *measures], rows, align="l" * (len(measures) + 1))


def _task_lines(task: str, t: Mapping[str, Any]) -> list[str]:
    dg = t["diagnosis"]
    sec = dg["seconds"]
    lines = [f"## {task} ({t['n_queries']} queries)", "", variant_table(t).markdown(), "",
             "Values x100; (delta vs original, * = significant at 0.05: paired randomization test, "
             "Holm-corrected over the variant pairs).", "",
             f"Diagnosis ({dg['method']['method']}): {dg['n_mentions']} mentions in {dg['n_docs']} documents, "
             f"{dg['n_flagged_entities']} flagged entities in {dg['n_docs_flagged']} documents. Cost: NER "
             f"{sec['ner']:.1f} s, embedding {sec['embed']:.1f} s, probe {sec['probe']:.2f} s, "
             + (f"audit {sec['audit']:.1f} s, " if sec.get("audit") else "") + "KB lookup "
             f"{t['kb_seconds']:.2f} s."]
    if t.get("llm"):
        u = t["llm"]
        lines.append(f"LLM synthesis: {u.get('requests', 0)} requests, {u.get('calls', 0)} calls, "
                     f"{u.get('cache_hits', 0)} cache hits, {u.get('prompt_tokens', 0)} prompt and "
                     f"{u.get('completion_tokens', 0)} completion tokens, {u.get('truncated', 0)} answers cut by "
                     "their token budget.")
    return lines + _table4_lines(t.get("max_rps_delta")) + [f"- {note}" for note in t.get("notes", [])] + [""]


def _table4_lines(deltas: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """Table 4 of the Original run, or nothing (a result written before it, or a depth under every cut-off)."""
    if not deltas:
        return []
    no_ent = next(iter(deltas.values()))["no_entities"]
    return ["", "Max predicted RPS of gold documents retrieved vs not in the top k, Original run (Table 4, appendix "
            f"E.1); {no_ent} (query, gold document) pairs whose document has no entity are left out.", "",
            max_rps_table({f"top {k}": d for k, d in deltas.items()}).markdown(), ""]


def _diagnosis_text(cfg: Mapping[str, Any]) -> str:
    if "diagnosis" not in cfg:  # a result written before --diagnosis existed: a probe, or the label prior
        return f"probe {cfg['probe'] or 'none (label-prior fallback)'}"
    used = cfg["diagnosis_method"] + (f" {cfg['probe']}" if cfg.get("probe") else "")
    return f"diagnosis {cfg['diagnosis']} ({used})"


def comparison_markdown(d: Mapping[str, Any]) -> str:
    """Markdown tables from an ``argus_compare.json`` dict."""
    cfg = d["config"]
    lines = [f"# ARGUS with and without: {d['task']} | {d['retriever']}", "",
             *([f"**{PIPELINE_CHECK_NOTE}**", ""] if cfg.get("pipeline_check") else []),
             f"Diagnosis: tau={cfg['tau']}, k_aug={cfg['k_aug']}, NER {cfg['ner']}, Reference KB {cfg['kb']}, "
             f"{_diagnosis_text(cfg)}; retrieval depth {cfg['k']}, seed {cfg['seed']}.",
             ""]
    for task, t in d["tasks"].items():
        lines += _task_lines(task, t)
    fba = d.get("full_benchmark_avg") or {}
    if d.get("suite") and fba:
        lines += [f"## Full Benchmark Avg. ({d['suite']}, {len(d['tasks'])} tasks)", "", average_table(fba).markdown(),
                  ""]
    lines += [f"- {note}" for note in d.get("notes", [])]
    return "\n".join(lines).rstrip() + "\n"


def _tasks_of(task: str) -> tuple[list[str], str | None]:
    from ...suites import get_suite, is_suite

    if is_suite(task):
        return list(get_suite(task).tasks), task
    return [task], None


def _synthesis(corpus: Any, diag: Any, kb: ReferenceKB, llm: Any, k_aug: int,
               hits: Mapping) -> tuple[list, float, dict]:
    """The synthesis views, the seconds they took and the LLM usage they added (requests, tokens, cache hits)."""
    before = llm.usage.total()
    t0 = time.perf_counter()
    views = synthesis_views(corpus, diag, kb, llm, k_aug, hits=hits)
    seconds = time.perf_counter() - t0
    after = llm.usage.total()
    return views, seconds, {key: after[key] - before[key] for key in after if isinstance(after[key], int)}


def table4(run: Any, qrels: Any, diag: Any, depth: int, ks: Sequence[int] = TABLE4_KS) -> dict[int, dict]:
    """Table 4 / appendix E.1 for one run: :func:`.probe.max_rps_delta` at each k in ``ks`` within the run's
    retrieval ``depth`` (a deeper cut-off would count documents past the depth as unretrieved)."""
    rps = entity_rps(diag)
    return {k: max_rps_delta(run, qrels, rps, k) for k in ks if k <= depth}


def compare_task(task: str, retriever: Any, options: ArgusCompareOptions) -> TaskComparison:
    """Original vs ARGUS variants on one task, with one retriever object for embedding, diagnosis and ranking.

    ``options`` come resolved by :func:`compare_argus_with`: ``kb`` a :class:`ReferenceKB`, ``probe`` an object (it
    scores the mentions when given) or None, ``diagnosis`` a method of :func:`.augment.diagnosis_for` (``audit`` or
    ``label-prior``) for when it is None, ``llm`` the synthesis client or None."""
    from ...evaluation.comparison import compare
    from ...evaluation.evaluation import evaluate
    from ...pipeline import prepare

    # the prepared queries carry the task's instruction, as `gapbench run` searches them
    probe, kb_obj, llm, k_aug, k, seed = options.probe, options.kb, options.llm, options.k_aug, options.k, options.seed
    prepared = prepare(task, seed=seed)
    data, name = prepared.data, prepared.task.name
    notes: list[str] = []
    results, growth, seconds, runs = {}, {}, {}, {}

    def run_variant(label: str, retr: Any, augment_s: float, views: Sequence = ()) -> None:
        t0 = time.perf_counter()
        retr.index(data.corpus)
        t1 = time.perf_counter()
        run = runs[label] = prepared.search(retr, k).renamed(label)
        t2 = time.perf_counter()
        results[label] = evaluate(run, data.qrels, list(options.measures), task=name, seed=seed)
        growth[label] = view_stats(data.corpus, views)
        seconds[label] = {"augment": augment_s, "index": t1 - t0, "search": t2 - t1}

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
    llm_usage = None
    if "expansion" in options.variants:
        t0 = time.perf_counter()
        views = expansion_views(data.corpus, diag, kb_obj, k_aug, hits=hits)
        run_variant("expansion", Augmented(retriever, views, name="expansion"), time.perf_counter() - t0, views)
    if "synthesis" in options.variants:
        if llm is None:
            notes.append("synthesis skipped: no LLM client given (llm=...).")
        else:
            views, aug_s, llm_usage = _synthesis(data.corpus, diag, kb_obj, llm, k_aug, hits)
            run_variant("synthesis", Augmented(retriever, views, name="synthesis"), aug_s, views)
            cut = synthesis_note(growth["synthesis"].get("synthesis"))
            if cut:
                notes.append(cut)
    cmp = compare(list(results.values()), seed=seed)
    return TaskComparison(name, results, cmp, diag.stats(), growth, seconds, kb_s, llm_usage, notes, rps_delta)


def _synthesis_llm(llm_base_url: str | None, llm_model: str | None) -> Any:
    # no endpoint given: the embedded LLM, as `gapbench gap` gets its verifier; a config problem (the local-llm extra
    # missing, a model without endpoint) also names the way to compare without synthesis
    try:
        return synthesis_client(llm_base_url, llm_model)
    except ConfigError as exc:
        raise ConfigError(f"{exc} To compare without synthesis, give --variants original,expansion.") from None


@dataclass(frozen=True)
class ArgusCompareOptions:
    """Every setting of an ARGUS comparison but the task and the retriever; settings no comparison can run with raise
    ConfigError here, before any work. ``kb``: a packaged name (default ``wikipedia-slice``; ``landmarks-oracle`` is a
    pipeline check whose KB states the answers) or a JSONL file. ``diagnosis``: ``auto`` (the probe given or bound to
    the retriever's fingerprint, else the exact audit), ``probe``, ``audit`` or ``label-prior``. ``measures`` None:
    nDCG@5/10/20/50 and R@5..100. ``variants`` None: all three with an LLM endpoint (or ``llm``/``llm_model``) given,
    else Original and Expansion (Synthesis on the embedded model is slow: ask for it by name). Example::

        cmp = compare_argus_with("impliret/multispeaker/wknow", "bm25",
                                 ArgusCompareOptions(variants=("original", "expansion"), output="out/"))
    """

    probe: Any = None
    kb: str | ReferenceKB = DEFAULT_KB
    tau: float = DEFAULT_TAU
    k_aug: int = DEFAULT_K_AUG
    ner: str = SPACY_DEFAULT
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm: Any = None
    variants: Sequence[str] | None = None
    measures: Sequence[str] | None = None
    k: int = 100
    seed: int = 0
    output: str | os.PathLike | None = None
    diagnosis: str = "auto"

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"k={self.k}: give the retrieval depth, >= 1.")
        if self.variants is not None:
            variants = list(dict.fromkeys(self.variants))
            if [v for v in variants if v not in VARIANTS] or "original" not in variants:
                raise ConfigError(f"variants {variants}: choose from {', '.join(VARIANTS)}, always including original.")
            object.__setattr__(self, "variants", tuple(variants))
        object.__setattr__(self, "measures", tuple(self.measures or DEFAULT_MEASURES))


def compare_argus(task: str, retriever: str | Any, **options: Any) -> ArgusComparison:
    """Original vs ARGUS Expansion and Synthesis on a task or a suite; writes outputs when ``output`` is given.

    The keywords are those of :class:`ArgusCompareOptions`; this builds one and calls :func:`compare_argus_with`.
    """
    return compare_argus_with(task, retriever, ArgusCompareOptions(**options))


def compare_argus_with(task: str, retriever: str | Any, options: ArgusCompareOptions) -> ArgusComparison:
    """:func:`compare_argus` with its settings in one :class:`ArgusCompareOptions`."""
    from dataclasses import replace

    from ...retrieval import fingerprint_of, get_retriever

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
    resolved = replace(options, probe=probe_obj, kb=kb_obj, llm=llm, diagnosis=method, variants=variants)
    tasks, suite = _tasks_of(task)
    out = [compare_task(t, retr, resolved) for t in tasks]
    config = {"tau": options.tau, "k_aug": options.k_aug, "ner": options.ner, "kb": kb_obj.name,
              "kb_fingerprint": kb_obj.fingerprint, "pipeline_check": kb_obj.name in ORACLE_KBS, "k": options.k,
              "measures": list(options.measures), "seed": options.seed, "diagnosis": options.diagnosis,
              "diagnosis_method": method, "probe": probe_source, "retriever_fingerprint": fingerprint_of(retr),
              "llm": llm.describe() if llm is not None and hasattr(llm, "describe") else None,
              "variants": list(variants)}
    notes = _notes(config, llm) + ([SYNTHESIS_SKIPPED] if skipped else [])
    result = ArgusComparison(suite or out[0].task, spec, out, config, suite, notes)
    if options.output is not None:
        write_outputs(result, options.output)
    return result


def endpoint_configured(llm_base_url: str | None = None) -> bool:
    """Whether an LLM endpoint is configured: given, or ``$OPENAI_BASE_URL``, or ``$OPENAI_API_KEY`` (OpenAI's own), as
    :meth:`gapbench.llm.client.LLMConfig.resolved` decides; without one LLM work goes to the embedded server."""
    from ...llm.client import LLMConfig

    return bool(llm_base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get(LLMConfig.api_key_env))


def _variants(options: "ArgusCompareOptions") -> tuple[tuple[str, ...], bool]:
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
        notes.append("Diagnosis by the label-prior heuristic (--diagnosis label-prior): NER labels FAC, GPE, LOC, ORG "
                     "count as high-risk (RPS 0), every other entity RPS 1; no probe, no audit.")
    elif method == "audit":
        notes.append("No probe is bound to this retriever: entities were flagged by an exact RPS audit with the "
                     "retriever itself (queries: each entity's top k_aug KB passages without its name; targets: the "
                     "documents that mention it; neutrals: the other documents), not by a probe's prediction.")
    if llm is not None and "synthesis" in config["variants"]:
        notes.append("Synthesis views come from the LLM named in config.llm; with the local test server "
                     "(tests/llm_server.py) they are echoes. " + SYNTH_TEST_SERVER_NOTE)
    return notes


def plot(d: Mapping[str, Any], path: Path) -> None:
    from ...files import pyplot

    plt = pyplot()
    if d.get("suite") and d.get("full_benchmark_avg"):
        table, title = d["full_benchmark_avg"], f"{d['task']} (Full Benchmark Avg.)"
    else:
        first = next(iter(d["tasks"]))
        table = {v: r["means"] for v, r in d["tasks"][first]["variants"].items()}
        title = first
    cuts = [m for m in next(iter(table.values())) if m.startswith("nDCG@")]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / max(1, len(table))
    for i, (v, row) in enumerate(table.items()):
        ax.bar([j + i * width for j in range(len(cuts))], [100 * row[m] for m in cuts], width, label=v)
    ax.set_xticks([j + width * (len(table) - 1) / 2 for j in range(len(cuts))], cuts)
    ax.set_ylabel("x100")
    ax.set_title(f"ARGUS: {title} | {d['retriever']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    write_figure(fig, path, dpi=110)


def write_outputs(result: ArgusComparison, out: str | os.PathLike, *, with_plot: bool = True) -> dict[str, Path]:
    """``argus_compare.json``, ``.md`` and ``.png`` in ``out`` (created), each written atomically."""
    out = output_folder(out)
    d = result.to_dict()
    paths = {"json": out / f"{KIND}.json", "md": out / f"{KIND}.md"}
    write_text_atomic(paths["json"], json.dumps(d, indent=2, sort_keys=False) + "\n")
    write_text_atomic(paths["md"], comparison_markdown(d))
    if with_plot:
        paths["png"] = out / f"{KIND}.png"
        plot(d, paths["png"])
    return paths


def read_outputs(out: str | os.PathLike) -> dict:
    """The ``argus_compare.json`` dict in ``out`` (checked kind and version), e.g. for ``gapbench report``."""
    path = Path(out) / f"{KIND}.json" if Path(out).is_dir() else Path(out)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GapbenchError(f"{path}: cannot read an argus_compare result ({exc}).") from None
    if d.get("kind") != KIND or d.get("version") != 1:
        raise GapbenchError(f"{path}: kind {d.get('kind')!r} version {d.get('version')!r}; expected {KIND!r} version 1.")
    return d


def argus_compare(task: str, retriever: str | Any, options: ArgusCompareOptions | None = None) -> ArgusComparison:
    """Original vs ARGUS Expansion (and Synthesis with an LLM) on a task or a suite (see
    :mod:`gapbench.analyses.argus.compare`)."""
    return compare_argus_with(task, retriever, options or ArgusCompareOptions())
