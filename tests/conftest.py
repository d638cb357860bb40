"""Suite-wide settings."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# CI machines are shared and slow: Hypothesis's per-example deadline (200 ms) would turn load
# into failures, which is a timed test in disguise. Correctness properties only here.
settings.register_profile("flaketui", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("flaketui")
