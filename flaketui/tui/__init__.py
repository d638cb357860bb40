"""The Textual triage app (`flaketui HISTORY.db`); the only package that imports textual."""
