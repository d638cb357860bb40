"""Regenerate the docs screenshots (docs/main.png, docs/detail.png, docs/suspects.png,
docs/order.png) from the sample history.

Usage: python tests/tui/screenshots.py [NAME...]   (needs rsvg-convert, Debian package
librsvg2-bin; NAME: main, detail, suspects or order, default all)
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from pilots import settle, until
from textual.pilot import Pilot

from flaketui.core.timeutil import parse_iso
from flaketui.tui.app import FlaketuiApp, make_app
from flaketui.tui.widgets.flake_table import FlakeTable

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SIZE = (160, 48)


async def _settle(app: FlaketuiApp, pilot: Pilot[Any]) -> None:
    await settle(pilot)
    table = app.main_screen.query_one(FlakeTable)
    # The rows after the first screenful.
    await until(pilot, lambda: table.row_count >= len(table.rows_by_key))
    app.clear_notifications()
    await pilot.pause()


async def shoot(work: Path) -> dict[str, Path]:
    """Save SVG screenshots of the list, of the order view of the test the sample's polluter
    breaks, of the billing family's detail, and of that detail's likely causes with the pivot
    by worker id."""
    app = make_app(
        "history.db",
        now=parse_iso("2026-11-30T18:00:00Z"),
        skip_file="quarantine.json",
        cursor_blink=False,
        watch=False,
    )
    shots: dict[str, Path] = {}
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        shots["main"] = Path(app.save_screenshot("main.svg", str(work)))
        table = app.main_screen.query_one(FlakeTable)
        victim = "tests/storage/test_cache.py::test_cache_invalidate_on_write"
        table.move_cursor(row=next(i for i, k in enumerate(table.row_order) if k.endswith(victim)))
        await pilot.press("enter")
        await _settle(app, pilot)
        await pilot.press("p")
        await _settle(app, pilot)
        shots["order"] = Path(app.save_screenshot("order.svg", str(work)))
        await pilot.press("escape")
        await _settle(app, pilot)
        if app.screen is not app.main_screen:
            await pilot.press("escape")
            await _settle(app, pilot)
        await pilot.press("4", "f")
        await _settle(app, pilot)
        table = app.main_screen.query_one(FlakeTable)
        keys = table.row_order
        table.move_cursor(row=next(i for i, k in enumerate(keys) if "g:tests/billing/" in k))
        await pilot.press("enter")
        await _settle(app, pilot)
        shots["detail"] = Path(app.save_screenshot("detail.svg", str(work)))
        await pilot.press("d")
        await _settle(app, pilot)
        app.screen.query_one("#suspects").scroll_visible(animate=False)
        await _settle(app, pilot)
        shots["suspects"] = Path(app.save_screenshot("suspects.svg", str(work)))
    return shots


def main(names: list[str]) -> int:
    """Write the docs screenshots named (all when none is)."""
    DOCS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="flaketui-shots-") as tmp:
        work = Path(tmp)
        shutil.copyfile(ROOT / "sample_data" / "history.db", work / "history.db")
        # Owners come from the CODEOWNERS beside the history, as for the sample in place.
        shutil.copyfile(ROOT / "sample_data" / "CODEOWNERS", work / "CODEOWNERS")
        os.chdir(work)
        for name, svg in asyncio.run(shoot(work)).items():
            if names and name not in names:
                continue
            target = DOCS / f"{name}.png"
            # rsvg drops a text span's leading spaces unless told to keep them (browsers keep them).
            text = svg.read_text(encoding="utf-8")
            svg.write_text(text.replace("<svg ", '<svg xml:space="preserve" ', 1), encoding="utf-8")
            subprocess.run(["rsvg-convert", "-w", "1600", str(svg), "-o", str(target)], check=True)
            print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
