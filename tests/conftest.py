"""Suite-wide settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import connections
from tests.pgcluster import Cluster, find_bindir, running_cluster

# CI machines are shared and slow: Hypothesis's per-example deadline (200 ms) would turn load
# into failures, which is a timed test in disguise. Correctness properties only here.
settings.register_profile("flaketui", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("flaketui")


@pytest.fixture(autouse=True)
def close_what_the_test_opened() -> Iterator[None]:
    """Close the histories and connections the test opened through tests/connections.py as
    it ends, once its other fixtures are torn down."""
    with connections.closed_at_exit():
        yield


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster for this test session (see tests/pgcluster.py)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[test]'")
    with running_cluster(bindir) as cluster:
        yield cluster


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """The URL (with password) of a fresh, empty database on the test cluster."""
    return pg_cluster.create_database()
