"""The command palette: every action of the app, searchable by name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

# (title, help, action, screen it needs: "main", "detail" or "any")
COMMANDS: tuple[tuple[str, str, str, str], ...] = (
    ("View: Flaky", "The flaky list, ranked by damage", "view('flaky')", "main"),
    ("View: Regressions", "Tests broken since a commit", "view('regressions')", "main"),
    ("View: Quarantined", "Entries of the skip file", "view('quarantined')", "main"),
    ("View: All", "Every scored test", "view('all')", "main"),
    ("Group by signature", "Toggle grouping by failure signature", "group('signature')", "main"),
    ("Group by family", "Toggle grouping by parametrized family", "group('family')", "main"),
    ("Group by co-failure", "Flaky tests failing in the same runs", "group('cofailure')", "main"),
    ("Expand or collapse group", "Show a group's members", "toggle_group", "main"),
    ("Filter", "Filter by test id, owner or signature", "filter", "main"),
    ("Clear filter", "Show every row again", "clear_filter", "main"),
    ("Sort by next column", "Cycle the sort column", "sort_next", "main"),
    ("Reverse sort", "Reverse the sort order", "sort_reverse", "main"),
    ("Cycle suite filter", "Show one suite at a time", "cycle_suite", "main"),
    ("Cycle branch-kind filter", "main, pr, release or all", "cycle_branch", "main"),
    ("Open detail", "Detail of the test or family under the cursor", "open_detail", "main"),
    ("Copy reproduction command", "Copy the repro command", "copy_repro", "detail"),
    ("Order view", "The tests that ran before it: candidate polluters", "order", "detail"),
    ("Quarantine test", "Write a skip-file entry and an audit row", "app.quarantine", "any"),
    ("Release test", "Remove the skip-file entry", "app.release", "any"),
    ("Export current view", "Write json, csv, markdown, deselect or list", "app.export", "main"),
    ("Review suspected outages", "Accept or reject outages excluded", "outages", "main"),
    ("Reload history", "Read the history again", "reload", "any"),
    ("Help", "Keys and columns", "app.help", "any"),
)


class FlaketuiCommands(Provider):
    """Offer the actions that make sense on the screen the palette was opened from."""

    def _available(self) -> list[tuple[str, str, str]]:
        from flaketui.tui.screens.detail import DetailScreen
        from flaketui.tui.screens.main import MainScreen

        scope = (
            "main"
            if isinstance(self.screen, MainScreen)
            else "detail"
            if isinstance(self.screen, DetailScreen)
            else "other"
        )
        return [
            (t, h, a)
            for t, h, a, s in COMMANDS
            if s in ("any", scope) and self.screen.check_action(a, ()) is not False
        ]

    async def _run(self, action: str) -> None:
        await self.app.run_action(action, self.screen)

    async def discover(self) -> Hits:
        """Everything, before the user types."""
        for title, help_text, action in self._available():
            yield DiscoveryHit(title, partial(self._run, action), help=help_text)

    async def search(self, query: str) -> Hits:
        """Fuzzy-match the titles."""
        matcher = self.matcher(query)
        for title, help_text, action in self._available():
            score = matcher.match(title)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(title), partial(self._run, action), help=help_text
                )
