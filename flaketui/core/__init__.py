"""Headless core of flaketui: no textual, rich or plotext imports below this package."""
