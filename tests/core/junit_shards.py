"""JUnit shard reports whose cases name their file, as a sharded job writes them."""

from __future__ import annotations

from pathlib import Path


def file_shard(path: Path, *cases: tuple[str, str, str], timestamp: str | None = None) -> Path:
    """A shard whose cases name their file in a ``file`` attribute (jest-junit's
    addFileAttribute, Gradle and Maven forks): (file, test name, outcome) per case, all of
    classname ``parser`` in one suite, stamped with `timestamp` when given."""
    body = "".join(
        f'<testcase classname="parser" name="{name}" file="{file}">'
        + ('<failure message="boom">Error: boom</failure>' if outcome == "fail" else "")
        + "</testcase>"
        for file, name, outcome in cases
    )
    stamp = f' timestamp="{timestamp}"' if timestamp is not None else ""
    path.write_text(
        f'<testsuites><testsuite name="jest tests"{stamp}>{body}</testsuite></testsuites>\n'
    )
    return path
