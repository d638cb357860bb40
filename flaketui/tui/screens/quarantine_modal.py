"""The quarantine dialog: reason (prefilled from the scores), mode, expiry and ticket."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.validation import Integer
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from flaketui.core.output.text import visible
from flaketui.core.timeutil import MAX_EXPIRY_DAYS
from flaketui.tui.loaders import QuarantineRequest
from flaketui.tui.widgets.fields import text_input

MODES = [("skip — deselect it in CI", "skip"), ("run — run it, ignore its failures", "run")]


class QuarantineModal(ModalScreen[QuarantineRequest | None]):
    """Collect what the skip-file entry says; dismiss with the request, or None on cancel."""

    # Loaded when the screen is first shown: the first screen need not parse it.
    CSS_PATH = "../dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "confirm", "Quarantine", tooltip="Write the skip-file entry"),
    ]

    def __init__(
        self,
        test_id: str,
        *,
        reason: str,
        expires_days: int,
        skip_file: str,
        blink: bool = True,
    ) -> None:
        super().__init__()
        self.test_id = test_id
        self.reason = reason
        self.expires_days = expires_days
        self.skip_file = skip_file
        self.blink = blink

    def compose(self) -> ComposeResult:
        """A titled form with two buttons."""
        with VerticalScroll(id="quarantine-dialog", classes="dialog"):
            # Text, not markup: a test id may hold brackets ("[gbp]") and any character.
            title = Text.assemble("Quarantine ", (visible(self.test_id), "bold"))
            yield Static(title, classes="dialog-title")
            yield Static(
                Text(f"writes {visible(self.skip_file)} and the audit log (Ctrl+S to confirm)"),
                classes="dim",
            )
            with Grid(classes="form"):
                yield Label("Reason")
                reason = TextArea(self.reason, id="reason", soft_wrap=True, show_line_numbers=False)
                reason.cursor_blink = self.blink
                yield reason
                yield Label("Mode")
                yield Select(MODES, value="skip", allow_blank=False, id="mode")
                yield Label("Expires in (days)")
                yield text_input(
                    str(self.expires_days),
                    id="expires",
                    validators=[Integer(minimum=1, maximum=MAX_EXPIRY_DAYS)],
                    blink=self.blink,
                )
                yield Label("Ticket")
                yield text_input(
                    placeholder="e.g. JIRA-123 or a URL", id="ticket", blink=self.blink
                )
            with Horizontal(classes="buttons"):
                yield Button("Quarantine", variant="warning", id="ok")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        """Start in the reason field."""
        self.query_one("#reason", TextArea).focus()

    def _request(self) -> QuarantineRequest | None:
        reason = " ".join(self.query_one("#reason", TextArea).text.split())
        expires = self.query_one("#expires", Input)
        if not reason:
            self.notify("A reason is required", severity="error")
            return None
        if not expires.is_valid:
            self.notify(
                f"Expiry must be a number of days (1 to {MAX_EXPIRY_DAYS})", severity="error"
            )
            return None
        mode = self.query_one("#mode", Select).value
        return QuarantineRequest(
            test_id=self.test_id,
            reason=reason,
            mode=str(mode),
            expires_days=int(expires.value),
            ticket=self.query_one("#ticket", Input).value.strip() or None,
        )

    @on(Button.Pressed, "#ok")
    @on(Input.Submitted)
    def action_confirm(self) -> None:
        """Dismiss with the filled-in request."""
        request = self._request()
        if request is not None:
            self.dismiss(request)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        """Dismiss without writing."""
        self.dismiss(None)
