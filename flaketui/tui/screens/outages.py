"""The review of suspected outages: each proposal's evidence, accepted or rejected one by one.

A suspected outage is a failure signature many distinct tests failed with at once and passed
again after (see docs/scoring.md, "Suspected outages"). Its runs are left out of scoring until
someone decides: accepting keeps them out (an ordinary incident), rejecting makes them count
again and the same cluster is never proposed again. The decision goes through the same core
functions as `flaketui incident accept|reject`, and through the app's write path (a trial copy
for a history git tracks, a refusal for a read-only one); the ranking reloads after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from flaketui.core.errors import FlaketuiError
from flaketui.core.output.text import visible
from flaketui.core.timeutil import to_iso
from flaketui.core.words import plural
from flaketui.tui.loaders import load_outages
from flaketui.tui.messages import LoadFailed
from flaketui.tui.widgets.keybar import KeyBar

if TYPE_CHECKING:
    from flaketui.tui.app import FlaketuiApp

EXPLANATION = (
    "Each is one failure signature that many distinct tests failed with at once, and that "
    "passed again after. Its runs are left out of scoring until you decide. Accept (a): they "
    "stay out, as an incident. Reject (x): they count again, and it is never proposed again."
)


def span_text(outage: Any) -> str:
    """The outage's time span: its first and last failing run, with the length between."""
    start, end = outage.start, outage.end
    if start == end:
        return to_iso(start)
    minutes = round((end - start).total_seconds() / 60)
    length = f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
    return f"{to_iso(start)} .. {to_iso(end)} ({length})"


def outage_text(outage: Any) -> Text:
    """One proposal and its evidence, four lines."""
    runs = len(outage.run_ids)
    text = Text.assemble((visible(outage.tag), "bold"), "  ", (span_text(outage), "cyan"))
    text.append("\n  ")
    text.append(f"{outage.failed_tests} of {outage.tests} distinct tests", "bold")
    text.append(f" failed with one signature in {plural(runs, 'run')}")
    if outage.suites:
        suites = visible(", ".join(outage.suites))
        text.append(f" (suite{'s' if len(outage.suites) > 1 else ''} {suites})")
    text.append("\n  signature ")
    text.append(outage.signature[:16], "dim")
    text.append(f"  {visible(outage.signature_text)}")
    text.append("\n  runs: ")
    text.append(visible(", ".join(outage.run_ids)), "dim")
    return text


class OutagesLoaded(Message):
    """The proposals awaiting review, read in a worker."""

    def __init__(self, outages: list[Any]) -> None:
        self.outages = outages
        super().__init__()


class OutagesScreen(Screen[None]):
    """The suspected outages awaiting review, with their evidence; accept or reject each."""

    DEFAULT_CSS = """
    OutagesScreen #outages-title {
        text-style: bold;
        margin-top: 1;
        padding: 0 1;
    }
    OutagesScreen #outages-explanation {
        color: $text-muted;
        margin-bottom: 1;
        padding: 0 1;
    }
    OutagesScreen #outages-list {
        height: 1fr;
        margin: 0 1;
    }
    OutagesScreen #outages-empty {
        color: $text-muted;
        padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", tooltip="Back to the list"),
        # A terminal's Escape is told from the start of an escape sequence only after a wait
        # (about 0.1 s); Backspace goes back at once.
        Binding("backspace", "app.pop_screen", "Back", show=False),
        Binding("a", "decide(True)", "Accept", tooltip="Keep the outage's runs out of scoring"),
        Binding("x", "decide(False)", "Reject", tooltip="Count the outage's runs again"),
        Binding("r", "reload", "Reload", tooltip="Read the proposals again"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
    ]
    AUTO_FOCUS = "#outages-list"

    def __init__(self) -> None:
        super().__init__()
        self.outages: list[Any] = []
        self.loaded = False

    @property
    def flaketui(self) -> FlaketuiApp:
        """The app, typed."""
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        """Title, what the decision does, the proposals, the keys."""
        yield Static("Suspected outages: reading…", id="outages-title")
        yield Static(EXPLANATION, id="outages-explanation")
        yield Static(id="outages-empty")
        yield OptionList(id="outages-list")
        yield KeyBar()

    def on_mount(self) -> None:
        """Read the proposals."""
        self.query_one("#outages-empty", Static).display = False
        self.reload()

    def reload(self) -> None:
        """Read the proposals again (after a decision, or on `r`)."""
        self._load()

    @work(thread=True, exclusive=True, group="outages", exit_on_error=False)
    def _load(self) -> None:
        try:
            outages = load_outages(self.flaketui.source)
        except FlaketuiError as exc:
            self.post_message(LoadFailed(exc.message))
            return
        self.post_message(OutagesLoaded(outages))

    @on(OutagesLoaded)
    def _loaded(self, event: OutagesLoaded) -> None:
        listing = self.query_one(OptionList)
        kept = listing.highlighted or 0
        self.outages = event.outages
        self.loaded = True
        listing.clear_options()
        listing.add_options(
            [Option(outage_text(outage) + "\n", id=outage.tag) for outage in self.outages]
        )
        count = len(self.outages)
        self.query_one("#outages-title", Static).update(
            f"Suspected outages: {count} awaiting review" if count else "Suspected outages"
        )
        empty = self.query_one("#outages-empty", Static)
        empty.display = not count
        listing.display = bool(count)
        if count:
            listing.highlighted = min(kept, count - 1)
        else:
            empty.update("No suspected outage awaits review: Esc goes back to the list.")

    @on(LoadFailed)
    def _failed(self, event: LoadFailed) -> None:
        self.notify(
            visible(event.message),
            title="Cannot read the history",
            severity="error",
            markup=False,
        )

    def current_tag(self) -> str | None:
        """The tag of the proposal under the cursor."""
        listing = self.query_one(OptionList)
        index = listing.highlighted
        if index is None or not self.outages:
            return None
        return listing.get_option_at_index(index).id

    def action_decide(self, accept: bool) -> None:
        """Accept or reject the proposal under the cursor."""
        tag = self.current_tag()
        if tag is None:
            self.notify("No suspected outage to decide on", severity="warning")
            return
        self.flaketui.review_outage(tag, accept=accept)

    def after_write(self) -> None:
        """A decision was written: read the proposals again."""
        self.reload()

    def action_reload(self) -> None:
        """Read the proposals again."""
        self.reload()
