"""The store: open and migrate a history, merge, prune, incidents."""
