"""Widgets of the app, one module per area."""
