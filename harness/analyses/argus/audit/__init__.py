"""The ARGUS entity retrievability audit (paper section 3): entities and relations (:mod:`.inputs`, a built dataset
folder: :mod:`.rps_dataset`), their encoders (:mod:`.encoders`), RPS from ranks (:mod:`.rps`), the audit itself
(:mod:`.retrievability`) and its files (:mod:`.audit_files`), and sweeps over ``N`` and ``k`` (:mod:`.sweep`)."""
