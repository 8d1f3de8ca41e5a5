"""ARGUS blind-spot probes (paper section 4): an entity's RPS predicted from its embedding. The families and their
grids (:mod:`.families`), the split, metrics and calibration (:mod:`.probe_metrics`), training and the saved probe
(:mod:`.training`), and the probe's files (:mod:`.probe_files`)."""
