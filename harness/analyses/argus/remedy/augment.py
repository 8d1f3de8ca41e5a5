"""The ARGUS remedy as an augmenter of ``gapbench run --augment argus-expand|argus-synth`` (:class:`ArgusAugmenter`,
:func:`augment_for_run`, the hook the ARGUS plugin registers): the corpus diagnosed (:func:`.diagnosis.diagnose`),
the flagged entities' passages looked up in the Reference KB, and Expansion or Synthesis views indexed beside the
originals by :class:`~.views.Augmented`::

    augmented = augment_retriever("argus-expand:kb=wikipedia-slice,tau=0.3", retriever, corpus)
"""

from __future__ import annotations

from typing import Any

from ....types import Corpus
from .diagnosis import DEFAULT_TAU, diagnose
from .kb import DEFAULT_K_AUG, DEFAULT_KB, ORACLE_KBS, PIPELINE_CHECK_NOTE, ReferenceKB
from .ner import SPACY_DEFAULT
from .probe_binding import diagnosis_for, mention_scorer
from .views import Augmented, View, expansion_views, synthesis_note, synthesis_views, view_stats

AUGMENTERS = ("argus-expand", "argus-synth")


def synthesis_client(llm_base_url: str | None = None, llm_model: str | None = None) -> Any:
    """The LLM client that writes synthesis views: the endpoint given (``--llm-base-url``/``--llm-model``, or
    ``$OPENAI_BASE_URL``/``$OPENAI_API_KEY``), else the embedded llama.cpp server, as every LLM command resolves it
    (:meth:`gapbench.llm.client.LLMConfig.resolved`; :func:`gapbench.llm.local.embedded_config`, which prints its
    notice when it starts the server). Resolved here, so a bad endpoint or a missing extra fails before any work::

        llm = synthesis_client()                                    # the embedded SmolLM2
        llm = synthesis_client("http://localhost:8000/v1", "m")     # that endpoint's model m
    """
    from ....llm.client import LLMClient, LLMConfig

    return LLMClient(LLMConfig(base_url=llm_base_url, model=llm_model))


def augment_for_run(spec: str, retriever: Any, corpus: Corpus, *, llm_base_url: str | None = None,
                    llm_model: str | None = None) -> tuple[Augmented, dict]:
    """The ``--augment`` hook of ``gapbench run`` (registered in :data:`gapbench.retrieval.RUN_AUGMENTERS` through the
    entry-point group ``gapbench.augmenters``): the augmented retriever and the manifest's ``augment`` entry."""
    augmenter = ArgusAugmenter(spec, retriever, llm_base_url=llm_base_url, llm_model=llm_model)
    augmented = _wrapped(augmenter, corpus)
    entry = {"spec": spec, **view_stats(corpus, augmented.views), **augmenter.used}
    notes = [PIPELINE_CHECK_NOTE] if augmenter.used["kb"] in ORACLE_KBS else []
    notes += [n for n in [synthesis_note(entry.get("synthesis"))] if n]
    if notes:
        entry["note"] = " ".join(notes)
    return augmented, entry


class ArgusAugmenter:
    """An :class:`gapbench.retrieval.Augmenter`: ``argus-expand[:kb=K,tau=T,k_aug=N,probe=DIR,ner=M,diagnosis=D]`` or
    ``argus-synth:...`` (plus ``keep_truncated=true``: index answers still cut by their token budget);
    ``augment(corpus)`` diagnoses the corpus with ``retriever`` (``diagnosis=auto``: the probe
    given or bound to the retriever, else the exact audit; ``audit``; ``label-prior`` on request) and returns the
    views. ``kb`` defaults to the packaged ``wikipedia-slice``; ``landmarks-oracle`` is a pipeline check."""

    def __init__(self, spec: str, retriever: Any, *, llm_base_url: str | None = None,
                 llm_model: str | None = None) -> None:
        from ....settings import build
        from ....specs import parse_spec

        name, options = parse_spec(spec)
        if name not in AUGMENTERS:
            from ....errors import UnknownNameError

            raise UnknownNameError("augmenter", name, AUGMENTERS)

        def settings(kb: str = DEFAULT_KB, tau: float = DEFAULT_TAU, k_aug: int = DEFAULT_K_AUG,
                     probe: str | None = None, ner: str = SPACY_DEFAULT, diagnosis: str = "auto",
                     keep_truncated: bool = False) -> dict:
            return {"kb": kb, "tau": tau, "k_aug": k_aug, "probe": probe, "ner": ner, "diagnosis": diagnosis,
                    "keep_truncated": keep_truncated}

        self.name, self.retriever = name, retriever
        self.options = build(settings, options, f"augmenter {name!r}")
        self.llm = {"base_url": llm_base_url, "model": llm_model}
        self.used: dict[str, Any] = {}  # what augment() used: the KB's name, the diagnosis method, the probe's source

    def augment(self, corpus: Corpus) -> list[View]:
        opts = self.options
        # the LLM is resolved first: a bad endpoint or a missing local-llm extra fails before the diagnosis
        llm = synthesis_client(self.llm["base_url"], self.llm["model"]) if self.name == "argus-synth" else None
        method, probe, source = diagnosis_for(opts["diagnosis"], self.retriever, opts["probe"])
        kb = ReferenceKB.resolve(opts["kb"])
        diag = diagnose(corpus, self.retriever, probe=probe, tau=opts["tau"], ner=opts["ner"],
                        fallback=mention_scorer(method, self.retriever, corpus, kb, opts["k_aug"]))
        self.used = {"kb": kb.name, "diagnosis": method, "probe": source}
        if llm is None:
            return expansion_views(corpus, diag, kb, opts["k_aug"])
        views = synthesis_views(corpus, diag, kb, llm, opts["k_aug"], keep_truncated=opts["keep_truncated"])
        self.used["synthesis"] = views.check  # the manifest's count of answers cut by their budget
        return views


def augment_retriever(spec: str, retriever: Any, corpus: Corpus, *, llm_base_url: str | None = None,
                      llm_model: str | None = None) -> Augmented:
    """``--augment`` for ``gapbench run``: :class:`ArgusAugmenter`'s views of ``corpus``, with the retriever wrapped so
    that views collapse onto their source documents."""
    return _wrapped(ArgusAugmenter(spec, retriever, llm_base_url=llm_base_url, llm_model=llm_model), corpus)


def _wrapped(augmenter: ArgusAugmenter, corpus: Corpus) -> Augmented:
    retriever = augmenter.retriever
    views = augmenter.augment(corpus)
    return Augmented(retriever, views, name=f"{getattr(retriever, 'name', type(retriever).__name__)}+{augmenter.name}")

