"""ARGUS (Taghavi et al., "With Argus Eyes"), by concept: :mod:`.audit` (entity retrievability, RPS, sweeps),
:mod:`.probe` (blind-spot probes trained on the audit), :mod:`.remedy` (NER, diagnosis, the Reference KB, augmented
views and the with/without comparison) and :mod:`.tools` (the Wikidata dataset builder); :mod:`.verbs` and
:mod:`.argus_options` are the audit, probe and sweep verbs and their settings."""
