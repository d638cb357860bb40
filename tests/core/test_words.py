"""Counted words read right for one and for many; listed names read as alternatives."""

from __future__ import annotations

from flaketui.core.words import either, plural


def test_one_is_singular_every_other_count_plural() -> None:
    assert plural(1, "run") == "1 run"
    assert [plural(n, "run") for n in (0, 2, 11)] == ["0 runs", "2 runs", "11 runs"]
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry", "entries") == "3 entries"


def test_names_read_as_alternatives() -> None:
    assert either([]) == ""
    assert either(["trunk"]) == "trunk"
    assert either(["main", "master"]) == "main or master"
    assert either(("main", "master", "trunk")) == "main, master or trunk"
