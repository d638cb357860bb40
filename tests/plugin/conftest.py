"""Fixtures for the plugin's pytester tests."""

from __future__ import annotations

import os

import pytest

CI_PREFIXES = ("GITHUB_", "GITLAB_", "CI_", "BUILDKITE", "CIRCLE", "JENKINS", "BUILD_", "GIT_")
CI_NAMES = ("CI", "BUILD_ID", "BUILD_URL", "JOB_NAME", "HUDSON_URL", "TF_BUILD")


@pytest.fixture
def recording_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CI variables (each session is a fresh run) and no plugin autoloading (fast sessions)."""
    for name in list(os.environ):
        if name.startswith(CI_PREFIXES) or name in CI_NAMES or name.startswith("PYTEST_XDIST"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
