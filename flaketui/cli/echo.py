"""The commands' text for people: text from CI shown in the order it is written, inert.

A command's text names test ids, failure messages, branches, hosts and incident tags taken from
CI reports, or given on its command line. `echo_text` shows each line's control and
bidirectional formatting characters as escapes (flaketui.core.output.text.visible): nothing a
report holds reaches the terminal as a command (a colour, a title, a clipboard write, a carriage
return over the line) or makes one id read as another. Output meant to be parsed back (JSON,
CSV, a list of ids, Markdown already made inert) is written as it is, with click.echo.

One message is one line: a message that names a test id, an incident tag, a run or a note is
written with `echo_line`, which shows a line break in them as `\\n`, as a table's cell and
`check`'s lines show it, instead of starting a line of its own.
"""

from __future__ import annotations

import click

from flaketui.core.output.text import visible


def echo_text(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """click.echo of `text` of one line or several (a table), each line through `visible`."""
    click.echo("\n".join(visible(line) for line in text.split("\n")), err=err, nl=nl)


def echo_line(message: str, *, err: bool = False) -> None:
    """click.echo of one message as one line: all of it through `visible`, line breaks too."""
    click.echo(visible(message), err=err)
