"""Renderings of reports and exports of quarantine decisions."""
