"""Scoring, verdict and quarantine constants, overridable in `[tool.flaketui]` of pyproject.toml."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flaketui.core.errors import ConfigError
from flaketui.core.timeutil import MAX_DAYS, MAX_EXPIRY_DAYS

# Day settings (every `*_days`) lie within 0..MAX_DAYS; these must be above 0, and an expiry
# is at most MAX_EXPIRY_DAYS, as a quarantine's --expires.
POSITIVE_DAYS = frozenset({"window_days", "half_life_days", "skip_expiry_days"})
# Run dimensions a JUnit report's properties may state (see junit_properties).
RUN_DIMENSIONS = ("runner_host", "os", "python", "platform", "order_seed")


@dataclass(frozen=True)
class Config:
    """Every tunable constant, with their defaults (docs/scoring.md, docs/lifecycle.md)."""

    z: float = 1.96  # Wilson interval, ~95 %
    n_min: int = 10  # fewer runs than this: verdict 'insufficient'
    window_days: int = 90
    half_life_days: float = 14.0  # recency score decay (exponential, by half-life)
    main_weight: float = 3.0
    other_weight: float = 1.0
    laplace_alpha: float = 2.0
    blast_radius_main: float = 4.0  # gates merges on the default branch
    blast_radius_branch: float = 2.0  # gates merges on feature branches only
    blast_radius_nongating: float = 1.0  # runs only in non-gating suites
    non_gating_suites: tuple[str, ...] = ("nightly",)
    default_branches: tuple[str, ...] = ("main", "master")
    regression_low: float = 0.70  # Wilson low at or above: failing almost always
    flaky_low_max: float = 0.50  # upper edge of the high-rate flaky band on the Wilson low
    healthy_high: float = 0.10
    # Verdict rules (flaketui.core.scoring.verdicts): a bad stretch on the default branch needs this
    # many runs to be a break; streaks (bad for a change point, clean for a resolved incident)
    # must be less likely than streak_surprise under the earlier rate; and a resolved incident
    # needs this many days between the last failure and the latest clean run.
    min_break_runs: int = 3
    streak_surprise: float = 0.05
    resolved_min_days: float = 3.0
    alternating_flip_rate: float = 0.80
    # Present-tense rates (flaketui.core.scoring.verdicts): weekly rates never extrapolate
    # from a shorter span; a flake whose rate's upper bound stays under rare_flake_rate is
    # healthy (flag rare-flake); a steady flake is called resolved by chance at most
    # false_resolution_rate of the time; a change in a test's daily bad-run rate counts
    # when a likelihood-ratio test passes at change_alpha (Bonferroni over the days).
    min_span_days: float = 7.0
    rare_flake_rate: float = 0.01
    false_resolution_rate: float = 0.025
    change_alpha: float = 0.01
    # Outage proposals (flaketui.core.history.outages): at least outage_min_tests distinct
    # tests, and outage_min_share of the tests their runs ran, failing with one signature in
    # one run or within outage_span_hours; excluded from scoring until a person rejects them.
    outage_min_tests: int = 5
    outage_min_share: float = 0.1
    outage_span_hours: float = 2.0
    exclude_proposed_outages: bool = True
    watch_threshold: float = 0.15
    quarantine_threshold: float = 0.30
    suite_thresholds: dict[str, float] = field(default_factory=dict)
    release_threshold: float = 0.10  # leave warning/watching below this (hysteresis)
    warning_days: int = 3
    auto_quarantine_days: int = 7
    fix_or_delete_days: int = 30
    removal_days: int = 60
    release_clean_runs: int = 10
    grace_days: int = 7
    skip_expiry_days: int = 30
    skip_file: str | None = None
    mask_patterns: tuple[str, ...] = ()
    owner_fallback: str | None = None  # suite owner of last resort
    suite_owners: dict[str, str] = field(default_factory=dict)
    rotation: tuple[str, ...] = ()
    # JUnit <property> name -> run dimension (runner_host, os, python, platform, order_seed)
    junit_properties: dict[str, str] = field(default_factory=dict)
    # Cause analysis: a suspect needs a corrected p-value at most this (Benjamini-Hochberg false
    # discovery rate), at least this many bad runs under its value and a rate this many times
    # the rest's (or the rest's this many times its own, for a value that protects).
    suspect_fdr: float = 0.05
    suspect_min_bad: int = 3
    suspect_min_ratio: float = 2.0

    def threshold_for(self, suite: str) -> float:
        """The quarantine threshold of one suite."""
        return self.suite_thresholds.get(suite, self.quarantine_threshold)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, reported with results."""
        out = dataclasses.asdict(self)
        return {key: list(val) if isinstance(val, tuple) else val for key, val in out.items()}


# Each setting's kind of value and its range, checked once where the table is read: a
# value that could not be computed with is refused there, naming the setting.
PROBABILITIES = frozenset(
    {"streak_surprise", "false_resolution_rate", "change_alpha", "suspect_fdr"}
)
SHARES = frozenset(
    {
        "regression_low",
        "flaky_low_max",
        "healthy_high",
        "alternating_flip_rate",
        "rare_flake_rate",
        "outage_min_share",
        "watch_threshold",
        "quarantine_threshold",
        "release_threshold",
    }
)
WEIGHTS = frozenset(
    {
        "main_weight",
        "other_weight",
        "laplace_alpha",
        "blast_radius_main",
        "blast_radius_branch",
        "blast_radius_nongating",
    }
)
COUNTS = frozenset(
    {"n_min", "min_break_runs", "outage_min_tests", "release_clean_runs", "suspect_min_bad"}
)
NAMES = frozenset({"skip_file", "owner_fallback"})
MAX_OUTAGE_SPAN_HOURS = MAX_DAYS * 24


def _refuse(name: str, wanted: str, value: Any) -> ConfigError:
    return ConfigError(f"[tool.flaketui] {name} must be {wanted}, got {value!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(
    name: str,
    value: Any,
    wanted: str,
    low: float,
    high: float,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> float:
    """A number within low..high (either end excluded when open), as a float."""
    if not _is_number(value):
        raise _refuse(name, wanted, value)
    number = float(value) if not isinstance(value, int) else value
    above = number > low if open_low else number >= low  # False for NaN too
    below = number < high if open_high else number <= high
    if not (above and below):
        raise _refuse(name, wanted, value)
    return float(number)


def _count(name: str, value: Any) -> int:
    if not _is_number(value) or not isinstance(value, int) or value < 1:
        raise _refuse(name, "a whole number above 0", value)
    return value


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _refuse(name, "a list of strings", value)
    if name == "mask_patterns":
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(
                    f"[tool.flaketui] mask_patterns: {pattern!r} is not a regular expression"
                    f" ({exc})"
                ) from None
    return tuple(value)


def _table(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _refuse(name, "a table", value)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if name == "suite_thresholds":
            out[key] = _number(f"{name}.{key}", item, "a number from 0 to 1", 0.0, 1.0)
        elif not isinstance(item, str):
            raise _refuse(f"{name}.{key}", "a string", item)
        elif name == "junit_properties" and item not in RUN_DIMENSIONS:
            raise ConfigError(
                f"[tool.flaketui] junit_properties: {key!r} maps to {item!r}, "
                f"not one of {', '.join(RUN_DIMENSIONS)}"
            )
        else:
            out[key] = item
    return out


def _days(name: str, default: float, value: Any) -> float:
    """A day setting within what the scores and expiries can be computed with."""
    positive = name in POSITIVE_DAYS
    high = MAX_EXPIRY_DAYS if name == "skip_expiry_days" else MAX_DAYS
    above = "above 0" if positive else "from 0"
    if isinstance(default, int) and not isinstance(value, int):
        wanted = f"a whole number of days {above} and at most {high}"
    else:
        wanted = f"a number of days {above} and at most {high}"
    if isinstance(default, int) and _is_number(value) and not isinstance(value, int):
        raise _refuse(name, wanted, value)
    number = _number(name, value, wanted, 0.0, high, open_low=positive)
    return int(number) if isinstance(default, int) else number


def _check(name: str, default: Any, value: Any) -> Any:
    """One configured value, checked against its setting's kind and range."""
    if name.endswith("_days"):
        return _days(name, default, value)
    if name in PROBABILITIES:
        return _number(
            name, value, "a number above 0 and below 1", 0.0, 1.0, open_low=True, open_high=True
        )
    if name in SHARES:
        return _number(name, value, "a number from 0 to 1", 0.0, 1.0)
    if name in WEIGHTS:
        return _number(name, value, "a finite number from 0", 0.0, math.inf, open_high=True)
    if name in COUNTS:
        return _count(name, value)
    if name in NAMES:
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise _refuse(name, "a non-empty string", value)
        return value
    if name == "z":
        return _number(
            name, value, "a finite number above 0", 0.0, math.inf, open_low=True, open_high=True
        )
    if name == "suspect_min_ratio":
        return _number(name, value, "a finite number from 1", 1.0, math.inf, open_high=True)
    if name == "outage_span_hours":
        wanted = f"a number of hours from 0 and at most {MAX_OUTAGE_SPAN_HOURS}"
        return _number(name, value, wanted, 0.0, MAX_OUTAGE_SPAN_HOURS)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise _refuse(name, "true or false", value)
        return value
    if isinstance(default, tuple):
        return _strings(name, value)
    if isinstance(default, dict):
        return _table(name, value)
    raise AssertionError(f"no check for setting {name}")  # every setting has one (tested)


def config_from_mapping(table: dict[str, Any]) -> Config:
    """Build a Config from a `[tool.flaketui]` table, refusing unknown keys, wrong types and
    values out of range."""
    known = {f.name: f for f in dataclasses.fields(Config)}
    defaults = Config()
    values: dict[str, Any] = {}
    spelt: dict[str, str] = {}
    for name, value in table.items():
        key = name.replace("-", "_")
        if key not in known:
            raise ConfigError(f"[tool.flaketui] unknown setting {name!r}")
        # Dashes and underscores spell one setting: written both ways, neither may win.
        if key in spelt:
            raise ConfigError(
                f"[tool.flaketui] {key} is set twice, as {spelt[key]!r} and {name!r}; keep one"
            )
        spelt[key] = name
        values[key] = _check(key, getattr(defaults, key), value)
    return dataclasses.replace(defaults, **values)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above start."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_config(start: Path | None = None) -> Config:
    """Read `[tool.flaketui]` from the nearest pyproject.toml, or the defaults."""
    pyproject = find_pyproject(start or Path.cwd())
    if pyproject is None:
        return Config()
    import tomllib  # only with a file to read: every recording pytest session loads this module

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: cannot read ({exc})") from exc
    except RecursionError:  # the parser recurses per nested array or inline table
        raise ConfigError(f"{pyproject}: cannot read (nested too deeply)") from None
    table = data.get("tool", {}).get("flaketui", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.flaketui] must be a table")
    return config_from_mapping(table)
