"""Allow `python -m flaketui`."""

from __future__ import annotations

from flaketui.cli import main

if __name__ == "__main__":
    main()
