"""What users publish and gate on: the report, leaderboards, submissions and regression checks."""
