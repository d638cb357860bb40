"""Recover pytest node ids from the classname/name/file that pytest's junitxml wrote.

What pytest writes (``_pytest.junitxml.mangle_test_address`` + ``record_testreport``): the node id
is split at its first ``[``; the part before it is split on ``::``; the first piece (the file path)
has ``/`` replaced by ``.`` and a trailing ``.py`` removed; the params go back onto the last piece.
``classname`` is the pieces but the last joined with ``.``, ``name`` the last piece (function name
plus params, verbatim: dots, slashes and ``::`` inside ``[...]`` survive). xunit1 also writes
``file`` (the item's location path, which equals the node id's path for ordinary test files).

Reversing it:
- with ``file`` (xunit1): the module's dotted form is known, so the rest of the classname is the
  class chain, exact whenever the classname starts with the dotted form of ``file``.
- without ``file`` (xunit2, the default): the module/class boundary is guessed. The module ends at
  the LAST segment that looks like a pytest test file (``test_*`` or ``*_test``, pytest's default
  ``python_files``); failing that, classes start at the first segment beginning with an uppercase
  letter; failing that, the whole classname is the module path.

Unavoidable ambiguities (ids then differ from ``item.nodeid``):
- xunit2 only: directory or module names containing dots (``tests/v1.2/test_x.py``), modules not
  named ``test_*``/``*_test`` whose directories start with an uppercase letter, and classes named
  like test modules; non-``.py`` items (doctest text files, plugin items) whose path lost nothing
  recoverable; node ids whose file path contains ``[``.
- both: ``--junitprefix`` (prepended to classname), names with XML-invalid characters (pytest
  writes them as ``#x1B``), and user attributes overriding ``classname``/``name``/``file``.
"""

from __future__ import annotations

import re
from functools import lru_cache

_MODULE_SEGMENT = re.compile(r"^(test_.*|.*_test)$")


def _node_id(module_path: str, classes: list[str], name: str) -> str:
    """Join a module path, a class chain and a test name into a node id."""
    return "::".join([module_path, *classes, name]) if name else "::".join([module_path, *classes])


def _split_dotted(classname: str) -> tuple[list[str], list[str]]:
    """Split a dotted xunit2 classname into (module segments, class segments)."""
    segments = classname.split(".")
    module_ends = [i for i, seg in enumerate(segments) if _MODULE_SEGMENT.match(seg)]
    if module_ends:
        cut = module_ends[-1] + 1
    else:
        uppercase = [i for i, seg in enumerate(segments) if i > 0 and seg[:1].isupper()]
        cut = uppercase[0] if uppercase else len(segments)
    return segments[:cut], segments[cut:]


def pytest_node_id(classname: str, name: str, file: str | None) -> tuple[str, str | None]:
    """Map pytest's junitxml (classname, name, file) to (node id, test file path)."""
    prefix, test_file = _prefix(classname, file or None)
    if prefix is None:
        return name, test_file
    return (f"{prefix}::{name}" if name else prefix), test_file


# Every case of a class shares its (classname, file): map that pair once, not once per case.
@lru_cache(maxsize=4096)
def _prefix(classname: str, file: str | None) -> tuple[str | None, str | None]:
    """The node id without its test name (None: the name alone), and the test file path."""
    file_path = file.replace("\\", "/") if file else None
    if file_path:
        dotted = file_path.removesuffix(".py").replace("/", ".")
        if classname == dotted:
            return _node_id(file_path, [], ""), file_path
        if classname.startswith(dotted + "."):
            classes = classname[len(dotted) + 1 :].split(".")
            return _node_id(file_path, classes, ""), file_path
    if not classname:
        # Hand-written or module-less items: the file, when known, is the node id's path.
        return file_path, file_path
    module_segments, classes = _split_dotted(classname)
    module_path = "/".join(module_segments) + ".py"
    return _node_id(module_path, classes, ""), file_path or module_path
