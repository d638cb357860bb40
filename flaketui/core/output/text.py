"""Text from CI (test ids, failure messages, owners) made safe to show.

A test id or a message can hold anything a runner wrote: control characters, line breaks,
Markdown and HTML. Every output that is not data meant to be parsed back (JSON, CSV, a list of
ids) shows such text through these functions:

- `visible`: control characters (C0, DEL, C1: line breaks, ESC, BEL, ...) and bidirectional
  formatting characters (U+202E, U+2066, ...) written as escapes (`\\n`, `\\x1b`,
  `\\u202e`), everything else kept; the value is one line, sends a terminal no command, and
  reads in the order it is written (a right-to-left override cannot make one test id look like
  another).
- `visible_lines`: `visible` for text shown on several lines (a message in an HTML page): line
  breaks and tabs kept.
- `one_line`: for a log line or prose: `visible`, then each run of whitespace one space.
- `md_text`: for Markdown prose or a table cell: `one_line`, HTML-escaped, Markdown
  punctuation backslash-escaped; it renders as exactly the text of `one_line`.
- `code_span`: for a Markdown table cell in inline code: `visible` between backtick fences
  longer than any backtick run inside, so neither a backtick nor `<` ends or escapes it.

CSV is data, written as stored by the one writer every CSV output uses, `csv_table`.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Iterable, Sequence

# Unicode's bidirectional formatting characters: the marks (ALM, LRM, RLM), the embeddings and
# overrides (LRE..RLO) and the isolates (LRI..PDI).
_BIDI = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Those, DEL and the C1 controls, and the C0 controls: all of them, or all but tab, LF and CR.
_CONTROL = re.compile(rf"[\x00-\x1f\x7f-\x9f{_BIDI}]")
_CONTROL_BUT_LINES = re.compile(rf"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Backslash-escaped in Markdown text after HTML escaping ('$' opens math on GitHub); '&', ';' and
# '#' stay, since they spell the entities html.escape writes. The text never starts a line, so
# the line-start markers ('#', '-', '+', '1.') need no escape.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()!|~$])")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def visible(text: object) -> str:
    """Text with its control and bidirectional formatting characters shown as escapes: one
    line, inert in a terminal, shown in the order it is written."""
    return _CONTROL.sub(_escape, str(text))


def visible_lines(text: object) -> str:
    """`visible`, with line breaks (LF, CR) and tabs kept."""
    return _CONTROL_BUT_LINES.sub(_escape, str(text))


def one_line(text: object) -> str:
    """`visible` text with each run of whitespace made one space."""
    return " ".join(visible(text).split())


def md_text(value: object) -> str:
    """Text as inert Markdown: one line, HTML-escaped, Markdown punctuation escaped; '-' if
    empty."""
    flat = "" if value is None else one_line(value)
    if not flat:
        return "-"
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", html.escape(flat, quote=True))


def code_span(text: str) -> str:
    """A table cell of inline code showing `visible(text)` verbatim (CommonMark fences, GFM pipe
    escapes)."""
    shown = visible(text)
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each end when both ends have one: pad so it strips ours.
    edge_space = shown.startswith(" ") and shown.endswith(" ") and bool(shown.strip())
    pad = " " if shown.startswith("`") or shown.endswith("`") or edge_space else ""
    return f"{fence}{pad}{shown}{pad}{fence}".replace("|", "\\|")


def csv_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """RFC 4180 CSV: the header row, then rows, each ended by CRLF; values as stored.

    CRLF because Python's writer quotes a value only for the characters of its line
    terminator: ended by LF alone, a value holding a bare CR (a test id may) is written
    unquoted, and a reader splits the row there.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()
