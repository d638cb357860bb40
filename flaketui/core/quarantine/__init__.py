"""The skip file, quarantine and release, and the quarantine lifecycle."""
