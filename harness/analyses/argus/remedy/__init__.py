"""ARGUS diagnosis and remedy (Taghavi et al., "With Argus Eyes", section 5 and appendix D): find the named entities a
retriever is likely to miss, and index augmented views of their documents beside the originals. One concept a module:

- :mod:`.ner`: the mentions (:func:`~.ner.extract_mentions`: spaCy offline by default, or a transformers tagger);
- :mod:`.diagnosis`: mentions embedded with the target retriever, the scorers that stand in for a probe
  (``MentionAudit``, the exact audit; ``LabelPrior``, the label heuristic), flagged entities and
  :func:`~.diagnosis.diagnose`, which puts them together;
- :mod:`.probe_binding`: which scorer diagnoses a retriever (``diagnosis_for``; probes bound, shipped, loaded);
- :mod:`.kb`: the Reference KB (``ReferenceKB``, its one JSONL format, the packaged KBs) and its builder;
- :mod:`.views`: Expansion and Synthesis views and ``Augmented``, the retriever that indexes them;
- :mod:`.augment`: the ``--augment argus-expand|argus-synth`` hook of ``gapbench run``;
- :mod:`.remedy_compare` and :mod:`.compare_report`: ``gapbench argus compare``, with and without the remedy.

Diagnosis: NER over every document; each mention embedded in its document with the target retriever; a probe
(anything with ``predict(embeddings) -> RPS in [0, 1]``, e.g. ``gapbench.analyses.argus.probe.training.Probe``)
predicts each mention's RPS; an entity's document-level risk is the minimum over its mentions; entities with risk
< ``tau`` (default 0.3) are flagged, once per document. The scorer is chosen by ``diagnosis``: ``auto`` (default)
takes the probe given or bound to the retriever's fingerprint, else the probe shipped for the offline MiniLM when the
retriever is ``dense``, else an exact RPS audit of the mentioned entities with the retriever itself (no embeddings
needed, so bm25 too); ``label-prior`` only on request (place and organisation names RPS 0, every other entity 1).

Remedy: the flagged entities' passages in the Reference KB (BM25 by surface form, the top ``k_aug`` with a positive
score), Expansion or Synthesis views, indexed by ``Augmented``::

    kb = ReferenceKB.packaged("wikipedia-slice")                       # the default; landmarks-oracle: pipeline check
    diag = diagnose(corpus, retriever, probe=probe)                   # a probe; or fallback=MentionAudit(...)
    views = expansion_views(corpus, diag, kb)
    run = search_with(Augmented(retriever, views).indexed(corpus), queries, 100, None)
"""
