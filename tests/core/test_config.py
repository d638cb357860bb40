"""Every `[tool.flaketui]` setting refuses a value of the wrong type or out of range with one
line naming the setting, nested tables and lists included."""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flaketui.core.config import Config, config_from_mapping
from flaketui.core.errors import ConfigError

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
DEFAULTS = Config()
FIELDS = [f.name for f in dataclasses.fields(Config)]

# The kinds of value TOML can give, by the name of the kind.
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "str": st.text(max_size=8),
    "bool": st.booleans(),
    "int": st.integers(min_value=-(2**70), max_value=2**70),
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "datetime": st.one_of(
        st.datetimes(timezones=st.just(UTC)), st.dates(), st.times(), st.just(datetime.min)
    ),
}
ANY_SCALAR = st.one_of(*SCALARS.values())


def documented_settings() -> list[str]:
    """The keys of docs/configuration.md's settings table, with a shared row split."""
    names: list[str] = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `") and not line.startswith("| `FLAKETUI"):
            first = line.split("|")[1]
            names += re.findall(r"`([a-z_]+)`", first)
    return names


def kind_of(name: str) -> str:
    default = getattr(DEFAULTS, name)
    if isinstance(default, bool):
        return "bool"
    if default is None:
        return "str"
    if isinstance(default, tuple):
        return "list"
    if isinstance(default, dict):
        return "table"
    return type(default).__name__  # int or float


def accepts(kind: str) -> set[str]:
    return {"float": {"int", "float"}}.get(kind, {kind})


def wrong_values(name: str) -> st.SearchStrategy[Any]:
    """Values of a type the setting never takes, down to one wrong item of a list or table."""
    kind = kind_of(name)
    wrong = [strategy for scalar, strategy in SCALARS.items() if scalar not in accepts(kind)]
    strategies = [*wrong, st.lists(ANY_SCALAR, max_size=3)] if kind != "list" else wrong
    if kind != "table":
        strategies.append(st.dictionaries(st.text(max_size=5), ANY_SCALAR, max_size=3))
    if kind == "list":
        bad_item = st.one_of(*[s for k, s in SCALARS.items() if k != "str"], st.lists(ANY_SCALAR))
        strategies.append(
            st.tuples(st.lists(st.text(max_size=5), max_size=2), bad_item).map(
                lambda parts: [*parts[0], parts[1]]
            )
        )
    if kind == "table":
        good = st.text(max_size=5) if name != "suite_thresholds" else st.floats(0, 1)
        bad_kinds = {"suite_thresholds": {"int", "float"}}.get(name, {"str"})
        bad_item = st.one_of(
            *[s for k, s in SCALARS.items() if k not in bad_kinds], st.lists(ANY_SCALAR)
        )
        strategies.append(
            st.tuples(st.dictionaries(st.text(max_size=5), good, max_size=2), bad_item).map(
                lambda parts: {**parts[0], "bad key": parts[1]}
            )
        )
    return st.one_of(*strategies)


def assert_refused(table: dict[str, Any], name: str) -> str:
    with pytest.raises(ConfigError) as refused:
        config_from_mapping(table)
    message = refused.value.message
    assert "\n" not in message
    assert message.startswith(f"[tool.flaketui] {name}"), message
    return message


def test_the_documented_settings_are_the_settings() -> None:
    assert sorted(documented_settings()) == sorted(FIELDS)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(FIELDS).flatmap(lambda name: st.tuples(st.just(name), wrong_values(name))))
def test_a_wrong_type_is_one_line_naming_the_setting(case: tuple[str, Any]) -> None:
    name, value = case
    assert_refused({name: value}, name)
    assert_refused({name.replace("_", "-"): value}, name)


OUT_OF_RANGE = {
    "z": [0, -1.0, math.inf, math.nan],
    "n_min": [0, -3],
    "min_break_runs": [0],
    "outage_min_tests": [0],
    "release_clean_runs": [-1],
    "suspect_min_bad": [0],
    "streak_surprise": [0, 1, 1.5, math.nan],
    "false_resolution_rate": [0.0, 1.0],
    "change_alpha": [0, -0.1],
    "suspect_fdr": [1, math.inf],
    "regression_low": [1.01, -0.01, math.nan],
    "flaky_low_max": [2],
    "healthy_high": [-1],
    "alternating_flip_rate": [math.inf],
    "rare_flake_rate": [1.5],
    "outage_min_share": [-0.5],
    "watch_threshold": [3],
    "quarantine_threshold": [1.0001],
    "release_threshold": [math.nan],
    "main_weight": [-1, math.inf, math.nan],
    "other_weight": [-0.5],
    "laplace_alpha": [-2],
    "blast_radius_main": [math.inf],
    "blast_radius_branch": [-1],
    "blast_radius_nongating": [math.nan],
    "suspect_min_ratio": [0.5, math.inf],
    "outage_span_hours": [-1, 10**400, math.inf],
    "skip_file": ["", "  ", "a\0b"],
    "owner_fallback": [""],
    "suite_thresholds": [{"integration": 1.5}, {"unit": -0.1}, {"e2e": math.nan}],
    "junit_properties": [{"agent": "colour"}],
    "mask_patterns": [["order-[a-z+"], ["ok", "(unclosed"], ["*"]],
}


@pytest.mark.parametrize(
    ("name", "value"), [(name, value) for name, values in OUT_OF_RANGE.items() for value in values]
)
def test_a_value_out_of_range_is_one_line_naming_the_setting(name: str, value: Any) -> None:
    message = assert_refused({name: value}, name)
    if name == "mask_patterns":
        assert "is not a regular expression" in message


GOOD = {
    "z": [0.5, 3],
    "n_min": [1, 2**70],
    "streak_surprise": [0.001, 0.999],
    "quarantine_threshold": [0, 1, 0.4],
    "main_weight": [0, 10],
    "suspect_min_ratio": [1, 1.5],
    "outage_span_hours": [0, 0.5, 876_000],
    "exclude_proposed_outages": [False],
    "skip_file": ["ci/q.json"],
    "suite_thresholds": [{"integration": 0.4, "unit": 1}],
    "suite_owners": [{"unit": "@team"}],
    "junit_properties": [{"agent": "runner_host"}],
    "mask_patterns": [["order-[a-z]+", r"tenant \w+"]],
    "rotation": [[], ["@a", "@b"]],
}


@pytest.mark.parametrize(
    ("name", "value"), [(name, value) for name, values in GOOD.items() for value in values]
)
def test_values_in_range_are_kept(name: str, value: Any) -> None:
    config = config_from_mapping({name.replace("_", "-"): value})
    kept = getattr(config, name)
    assert kept == (tuple(value) if isinstance(value, list) else value)
    if isinstance(getattr(DEFAULTS, name), float):
        assert isinstance(kept, float)
    if name == "suite_thresholds":
        assert all(isinstance(v, float) for v in kept.values())


def test_datetime_values_are_refused_by_name() -> None:
    for value in (date(2026, 1, 1), time(12, 0), datetime(2026, 1, 1, tzinfo=UTC)):
        assert_refused({"window_days": value}, "window_days")


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([name for name in FIELDS if "_" in name]),
    st.data(),
)
def test_a_setting_spelt_two_ways_is_refused(name: str, data: st.DataObject) -> None:
    words = name.split("_")
    spellings = sorted(
        {name, name.replace("_", "-")}
        | {
            "".join(w + data.draw(st.sampled_from("-_")) for w in words[:-1]) + words[-1]
            for _ in range(2)
        }
    )
    first, second = data.draw(st.permutations(spellings))[:2]
    value = getattr(DEFAULTS, name)
    value = list(value) if isinstance(value, tuple) else value
    if value is None:
        value = "x"
    message = assert_refused({first: value, second: value}, name)
    assert "set twice" in message and repr(first) in message and repr(second) in message
