"""The `?` help screen: what each key does and what the columns mean."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# flaketui

**Keys — list**

| key | action |
|---|---|
| `↑ ↓ PgUp PgDn` | move |
| `Enter` | detail of the test or family (expands a signature group) |
| `1` `2` `3` `4` | views: Flaky, Regressions, Quarantined, All |
| `/` | filter by test id, owner or signature (`Esc` clears) |
| `g` / `f` | group by failure signature / by family (again: ungroup) |
| `w` | group the flaky tests that fail in the same runs, with the cause they share |
| `Space` | expand or collapse a group |
| `s` / `S` | sort by the next column shown / reverse (or click a header): `▲` `▼` mark it |
| `t` / `b` | cycle the suite / branch-kind filter |
| `q` / `u` | quarantine / release (writes the skip file and the audit log) |
| `e` | export the current view |
| `o` | review the suspected outages excluded from scoring (the line above the tabs counts them) |
| `r` | reload (the app also reloads when CI writes into the history) |
| `Ctrl+P` | command palette: every action |
| `Ctrl+Q` | quit |

**Keys — detail**: `c` copies the reproduction command, `d` pivots by the next dimension, `p`
shows the order view (the tests that ran before it: candidate polluters), `D` diagnoses, `x`
cancels it, `Esc` or `Backspace` goes back.

**Keys — suspected outages** (`o`): `a` accepts the one under the cursor (its runs stay out of
scoring, as an incident), `x` rejects it (its runs count again; it is never proposed again),
`Esc` or `Backspace` goes back. The ranking reloads after each decision.

**Columns** (a narrow screen shows fewer: see the docs' app page): *Damage* is expected
blocked merges per week (flake-rate lower bound × runs per week × blast radius), the default
ranking. *Since* is the day the current flaking began. *Likely cause* is the strongest suspect
of the cause analysis (`…` while it is read, `—` when nothing stands out; the detail lists them
all, `d` pivots by each dimension). *Recency* is the decayed score (14-day half-life)
that drives the lifecycle. *Wilson* is the 95 % interval of the failure rate. *Flip* is the share
of good↔bad transitions between consecutive runs. *State* is the lifecycle state; a `*` marks
one the lifecycle has derived but not yet written (the nightly `flaketui lifecycle --apply`
writes it: until then a `quarantined*` test is not in the skip file).

Press `Esc` to close.
"""


class HelpScreen(ModalScreen[None]):
    """Keys and column meanings."""

    # Loaded when the screen is first shown: the first screen need not parse it.
    CSS_PATH = "../dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        """One scrollable Markdown page."""
        with VerticalScroll(id="help-dialog", classes="dialog"):
            yield Markdown(HELP)
