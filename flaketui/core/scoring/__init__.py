"""Statistics, evidence, verdicts, daily series, the report, pivots and per-test detail."""
