"""Evaluation: measures over a run (``evaluate``), the resampling statistics, paired comparison of runs
and the re-scoring of stored run directories. Imports only the core."""
