"""Reproduction on demand: re-run a flaky test in the user's repository under experiments."""
