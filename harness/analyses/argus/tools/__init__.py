"""Tools beside the ARGUS analysis: :mod:`.wikidata` builds an RPS dataset folder from a Wikidata dump, which the
audit, the probe and the sweep then read (:mod:`gapbench.analyses.argus.audit.rps_dataset`)."""
