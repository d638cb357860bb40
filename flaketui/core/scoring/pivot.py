"""Pivots: failure rate and Wilson interval per worker count and worker id (the worker pivot),
and per value of any recorded dimension (the dimension pivot, from scoring.causes)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from flaketui.core.config import Config
from flaketui.core.history.dbhandle import Connected
from flaketui.core.rollups.evidence import counted_runs_cte
from flaketui.core.scoring.causes import (
    DIMENSIONS,
    DimensionRow,
    analyse,
    dimension_rows,
)
from flaketui.core.scoring.detail import resolve_target
from flaketui.core.scoring.results import Suspect
from flaketui.core.scoring.statistics import wilson_interval

_DIGITS = re.compile(r"(\d+)")


@dataclass(slots=True)
class PivotRow:
    """Counted runs and bad runs under one worker count or worker id."""

    key: str  # the worker count (as text) or the worker id ('' when unknown)
    runs: int
    bad_runs: int
    fail_rate: float
    wilson_low: float
    wilson_high: float


@dataclass(slots=True)
class Pivot:
    """A test's or a family's failure rate split by parallelism."""

    key: str
    kind: str  # test | family
    members: list[str]
    now: datetime
    runs: int  # counted runs (a family's: runs in which any param ran)
    bad_runs: int
    interrupted_runs: int = 0  # of those, runs whose recording never finished
    by_worker_count: list[PivotRow] = field(default_factory=list)
    by_worker_id: list[PivotRow] = field(default_factory=list)


# A family pools its params by run (bad if any param's first attempt failed), as the scorer does.
_BY_WORKER_COUNT = """
units AS (SELECT run, max(bad) AS bad, min(worker_count) AS worker_count FROM counted GROUP BY run)
SELECT worker_count, count(*), sum(bad) FROM units GROUP BY worker_count ORDER BY worker_count
"""

# Per worker id a family's run is split by the workers its params ran on.
_BY_WORKER_ID = """
units AS (
    SELECT run, coalesce(worker_id, '') AS worker, max(bad) AS bad FROM counted
    GROUP BY run, coalesce(worker_id, '')
)
SELECT worker, count(*), sum(bad) FROM units GROUP BY worker
"""


def _natural_key(text: str) -> list[object]:
    """Sort gw2 before gw10."""
    return [int(part) if part.isdigit() else part for part in _DIGITS.split(text)]


def _row(key: str, runs: int, bad: int, config: Config) -> PivotRow:
    low, high = wilson_interval(bad, runs, config.z)
    return PivotRow(key, runs, bad, bad / runs if runs else 0.0, low, high)


def interrupted_runs(db: Connected, test_ids: list[str], *, now: datetime, config: Config) -> int:
    """How many of the tests' counted runs never finished recording (a killed session).

    They count for the tests they recorded, as in scoring; the pivots say how many there are.
    """
    cte, params = counted_runs_cte(now, config, test_ids=test_ids)
    sql = (
        f"WITH {cte} SELECT count(DISTINCT c.run) FROM counted c JOIN runs r ON r.id = c.run "
        "WHERE r.finished = 0"
    )
    return int(db.conn.execute(sql, params).fetchone()[0])


def worker_pivot(db: Connected, test_or_parent: str, *, now: datetime, config: Config) -> Pivot:
    """Runs, bad runs and the Wilson interval per worker count and worker id, counted runs only."""
    target = resolve_target(db, test_or_parent)
    cte, params = counted_runs_cte(now, config, test_ids=target.test_ids)
    conn = db.conn
    by_count = [
        _row(str(count), int(runs), int(bad), config)
        for count, runs, bad in conn.execute(f"WITH {cte}, {_BY_WORKER_COUNT}", params)
    ]
    by_id = sorted(
        (
            _row(str(worker), int(runs), int(bad), config)
            for worker, runs, bad in conn.execute(f"WITH {cte}, {_BY_WORKER_ID}", params)
        ),
        key=lambda row: _natural_key(row.key),
    )
    return Pivot(
        key=target.key,
        kind=target.kind,
        members=target.test_ids,
        now=now,
        runs=sum(row.runs for row in by_count),
        bad_runs=sum(row.bad_runs for row in by_count),
        interrupted_runs=interrupted_runs(db, target.test_ids, now=now, config=config),
        by_worker_count=by_count,
        by_worker_id=by_id,
    )


@dataclass(slots=True)
class DimensionPivot:
    """A test's or family's failure rate split by recorded dimensions (see scoring.causes)."""

    key: str
    kind: str
    members: list[str]
    now: datetime
    runs: int
    bad_runs: int
    by: dict[str, list[DimensionRow]]  # dimension -> rows, in DIMENSIONS order
    suspects: list[Suspect]
    interrupted_runs: int = 0


def dimension_pivot(
    db: Connected,
    test_or_parent: str,
    dimensions: list[str],
    *,
    now: datetime,
    config: Config,
) -> DimensionPivot:
    """Runs, bad runs and the Wilson interval per value of each dimension, and the suspects."""
    for dimension in dimensions:
        if dimension not in DIMENSIONS:
            raise ValueError(f"unknown dimension {dimension!r}")
    analysis = analyse(db, test_or_parent, now=now, config=config)
    return DimensionPivot(
        key=analysis.key,
        kind=analysis.kind,
        members=analysis.members,
        now=now,
        runs=analysis.runs,
        bad_runs=analysis.bad_runs,
        by={dim: dimension_rows(analysis.units, dim, config) for dim in dimensions},
        suspects=analysis.suspects,
        interrupted_runs=interrupted_runs(db, analysis.members, now=now, config=config),
    )
