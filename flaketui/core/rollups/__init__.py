"""Aggregates that make scoring fast, maintained beside the raw rows and read back exactly."""
