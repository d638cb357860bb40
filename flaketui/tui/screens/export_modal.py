"""The export dialog: format and path for the tests of the current view."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from flaketui.core.words import plural
from flaketui.tui.actionmodel import default_export_name
from flaketui.tui.loaders import EXPORT_FORMATS
from flaketui.tui.widgets.fields import text_input


class ExportModal(ModalScreen[tuple[str, Path] | None]):
    """Dismiss with (format, path), or None on cancel."""

    # Loaded when the screen is first shown: the first screen need not parse it.
    CSS_PATH = "../dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "confirm", "Export"),
    ]

    def __init__(self, view: str, count: int, folder: Path, *, blink: bool = True) -> None:
        super().__init__()
        self.view = view
        self.count = count
        self.folder = folder
        self.blink = blink

    def compose(self) -> ComposeResult:
        """Format picker and path box."""
        with VerticalScroll(id="export-dialog", classes="dialog"):
            yield Static(
                f"Export the {self.view} view ({plural(self.count, 'test')})",
                classes="dialog-title",
            )
            with Grid(classes="form"):
                yield Label("Format")
                yield Select(
                    [(f, f) for f in EXPORT_FORMATS], value="json", allow_blank=False, id="format"
                )
                yield Label("Path")
                yield text_input(
                    str(self.folder / default_export_name(self.view, "json")),
                    id="path",
                    blink=self.blink,
                )
            with Horizontal(classes="buttons"):
                yield Button("Export", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    @on(Select.Changed, "#format")
    def _format(self, event: Select.Changed) -> None:
        # Keep the path's folder and name, follow the format's extension.
        box = self.query_one("#path", Input)
        current = Path(box.value or default_export_name(self.view, "json"))
        box.value = str(current.with_name(default_export_name(self.view, str(event.value))))

    @on(Button.Pressed, "#ok")
    @on(Input.Submitted)
    def action_confirm(self) -> None:
        """Dismiss with the chosen format and path."""
        path = self.query_one("#path", Input).value.strip()
        if not path:
            self.notify("A path is required", severity="error")
            return
        self.dismiss((str(self.query_one("#format", Select).value), Path(path).expanduser()))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        """Dismiss without writing."""
        self.dismiss(None)
