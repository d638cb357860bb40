"""The order view of the detail's test: the tests that ran before it on its worker in its bad
runs against its good runs, ranked as candidate polluters (flaketui.core.scoring.order)."""

from __future__ import annotations

import shlex
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from flaketui.core.config import Config
from flaketui.core.errors import FlaketuiError
from flaketui.core.output.text import visible
from flaketui.core.words import plural
from flaketui.tui.history_access import reading
from flaketui.tui.viewmodel import short_id
from flaketui.tui.widgets.tables import fit_rows

ROWS_SHOWN = 50
# The test id column: at least this wide, else what the dialog's frame and the other columns
# (their widest values and padding) leave of the screen's width.
ID_MIN_WIDTH = 20
OTHER_COLUMNS_WIDTH = 90
ROLE_STYLES = {"polluter": "bold red", "dependency": "cyan", "neutral": "dim"}


class OrderLoaded(Message):
    """The order view (flaketui.core.scoring.order.OrderView) is ready, or a one-line problem."""

    def __init__(self, view: Any | None, problem: str | None = None) -> None:
        self.view = view
        self.problem = problem
        super().__init__()


def order_summary(view: Any) -> Text:
    """The lines above the table: the runs counted, the fixed predecessors, the replay."""
    text = Text()
    text.append(
        f"{plural(view.ordered_runs, 'counted run')} with their order recorded "
        f"(of {view.runs}): {view.bad_runs} bad, {view.good_runs} good"
    )
    if not view.ordered_runs:
        text.append(
            "\nno order recorded: the pytest plugin records it (--flaketui-db); reports do not",
            "dim",
        )
    elif view.always_before:
        text.append(
            f"\n{plural(len(view.always_before), 'test')} ran before it in every recorded run: "
            "the order never varied for them",
            "dim",
        )
    elif not view.candidates:
        text.append("\nno test ran before it in some runs and not in others", "dim")
    if view.replay is not None:
        text.append(f"\nreplay run {visible(view.replay.run_id)}: ", "dim")
        text.append(visible(shlex.join(view.replay.command())), "bold")
    return text


class OrderModal(ModalScreen[None]):
    """Candidate polluters of one test or family, strongest first."""

    # Loaded when the screen is first shown: the first screen need not parse it.
    CSS_PATH = "../dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("p", "dismiss", "Close"),
    ]

    def __init__(self, key: str, *, path: Path, now: datetime, config: Config) -> None:
        super().__init__()
        self.key = key
        self.path = path
        self.now = now
        self.config = config
        self.view: Any = None

    def compose(self) -> ComposeResult:
        """A title, the summary and the ranked candidates."""
        with Vertical(id="order-dialog", classes="dialog"):
            yield Static(
                Text.assemble(("Ran before ", ""), (visible(self.key), "bold")),
                classes="dialog-title",
            )
            yield Static(Text("reading…", "dim"), id="order-summary")
            yield DataTable(id="order-table", cursor_type="row", zebra_stripes=True)
            yield Static(Text("Esc: close", "dim"))

    def on_mount(self) -> None:
        """Read the order view in a worker."""
        self.query_one("#order-table").display = False
        self._load()

    @work(thread=True, exclusive=True, group="order", exit_on_error=False)
    def _load(self) -> None:
        from flaketui.core.scoring.order import order_view

        try:
            with reading(self.path) as db:
                view = order_view(db, self.key, now=self.now, config=self.config)
        except FlaketuiError as exc:
            self.post_message(OrderLoaded(None, exc.message))
            return
        self.post_message(OrderLoaded(view))

    @on(OrderLoaded)
    def _loaded(self, event: OrderLoaded) -> None:
        summary = self.query_one("#order-summary", Static)
        if event.view is None:
            summary.update(Text(event.problem or "cannot read the order", "red"))
            return
        view = self.view = event.view
        summary.update(order_summary(view))
        if not view.candidates:
            return
        table = self.query_one("#order-table", DataTable)
        # The role and its p-value first after the test, so that 80 columns show them; the test
        # id takes the width the other columns leave.
        table.add_columns("ran before it", "role", "p (BH)", "in bad", "in good")
        table.add_column("fails with / without")
        id_width = max(ID_MIN_WIDTH, self.app.size.width - OTHER_COLUMNS_WIDTH)
        for candidate in view.candidates[:ROWS_SHOWN]:
            explained = candidate.explained_by
            # A role is the direction alone: in colour only where the p-value makes it a finding.
            chance = candidate.p_value > self.config.suspect_fdr
            style = "dim" if explained or chance else ROLE_STYLES.get(candidate.role, "")
            role = Text(candidate.role, style)
            if candidate.suspect:
                role.append(", suspect")
            if explained:
                role.append(f", explained by {visible(explained.rsplit('::', 1)[-1])}", "dim")
            table.add_row(
                # Text, not a string: a DataTable reads strings as markup, and "[gbp]" is a tag.
                Text(visible(short_id(candidate.test_id, id_width))),
                role,
                f"{candidate.p_value:.2g}",
                f"{candidate.bad_before}/{view.bad_runs}",
                f"{candidate.good_before}/{view.good_runs}",
                f"{candidate.rate_with:.0%} / {candidate.rate_without:.0%}",
            )
        fit_rows(table)
        table.display = True
