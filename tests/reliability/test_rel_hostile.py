"""Hostile XML: entity bombs, external entities and DTD fetches are refused, offline, in bounded
memory. Each file is ingested in a fresh child process whose sockets raise, while a local HTTP
server the files point at records any request; the child reports its peak RSS (VmHWM)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from reliability_support import child_command, child_env, junit_case

from flaketui.core.errors import ReportError
from flaketui.core.ingest import junit

# A child's RSS may grow this much over its size before the ingest (expat buffers, one chunk).
GROWTH_BOUND_KIB = 30 * 1024
PEAK_BOUND_KIB = 100 * 1024
CASES = "".join(junit_case("pkg.Mod", f"t{n}") for n in range(3))


class _Recorder(BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Recorder.requests.append(self.path)
        body = b'<!ENTITY leaked "from-the-network">'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A local HTTP server that records every request; yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def billion_laughs() -> str:
    levels = ['<!ENTITY lol0 "lollollollollollollollollollol">']
    levels += [f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)]
    return (
        f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [{"".join(levels)}]>\n'
        f'<testsuite name="s"><testcase classname="a" name="b">'
        f'<failure message="&lol9;"/></testcase></testsuite>\n'
    )


def quadratic_blowup() -> str:
    # 100 KB entity referenced 20 000 times: 2 GB once expanded, from a 200 KB file.
    return (
        f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!ENTITY a "{"A" * 100_000}">]>\n'
        f'<testsuite name="s"><testcase classname="a" name="b">'
        f"<failure>{'&a;' * 20_000}</failure></testcase></testsuite>\n"
    )


def hostile_files(base: str) -> dict[str, str]:
    """Name -> content of each hostile report; `base` is the recording server's URL."""
    late_bomb = billion_laughs().replace(
        '<?xml version="1.0"?>\n', '<?xml version="1.0"?>\n<!-- ' + "x" * 200_000 + " -->\n"
    )
    return {
        "billion-laughs": billion_laughs(),
        "quadratic-blowup": quadratic_blowup(),
        "bomb-after-200KB": late_bomb,
        "external-entity-http": (
            f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!ENTITY ext SYSTEM "{base}/ext">]>\n'
            f'<testsuite name="s">{CASES}<testcase classname="a" name="b">'
            f"<failure>&ext;</failure></testcase></testsuite>\n"
        ),
        "external-entity-file": (
            '<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!ENTITY ext SYSTEM "file:///etc/passwd">]>'
            '\n<testsuite name="s"><testcase classname="a" name="b"><failure>&ext;</failure>'
            "</testcase></testsuite>\n"
        ),
        "external-dtd": (
            f'<?xml version="1.0"?>\n<!DOCTYPE testsuite SYSTEM "{base}/report.dtd">\n'
            f'<testsuite name="s">{CASES}</testsuite>\n'
        ),
        "parameter-entity": (
            f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!ENTITY % p SYSTEM "{base}/p.dtd"> %p;]>'
            f'\n<testsuite name="s">{CASES}</testsuite>\n'
        ),
        "public-dtd": (
            '<?xml version="1.0"?>\n<!DOCTYPE testsuite PUBLIC "-//X//DTD JUnit//EN" '
            f'"{base}/public.dtd">\n<testsuite name="s">{CASES}</testsuite>\n'
        ),
        "unparsed-entity": (
            '<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!NOTATION gif SYSTEM "image/gif">'
            f'<!ENTITY logo SYSTEM "{base}/logo.gif" NDATA gif>]>\n'
            f'<testsuite name="s">{CASES}</testsuite>\n'
        ),
    }


XINCLUDE = "xinclude-and-stylesheet"


@pytest.fixture(scope="module")
def outcomes(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Ingest every hostile file in ONE child (peak RSS is reset per file); outcome by name."""
    folder = tmp_path_factory.mktemp("hostile")
    files = hostile_files(server)
    files[XINCLUDE] = (
        f'<?xml version="1.0"?>\n<?xml-stylesheet type="text/xsl" href="{server}/style.xsl"?>\n'
        f'<testsuite name="s" xmlns:xi="http://www.w3.org/2001/XInclude">'
        f'<xi:include href="{server}/include.xml" parse="xml"/>{CASES}</testsuite>\n'
    )
    paths = []
    for name, content in files.items():
        paths.append(folder / f"{name}.xml")
        paths[-1].write_text(content)
    _Recorder.requests.clear()
    proc = subprocess.run(
        child_command("ingest", *paths),
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(paths), proc.stdout
    found = {name: json.loads(line) for name, line in zip(files, lines, strict=True)}
    for name, path in zip(files, paths, strict=True):
        conn = sqlite3.connect(f"{path}.db")
        try:
            found[name]["runs"] = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        finally:
            conn.close()
        found[name]["path"] = str(path)
    found["_server"] = {"requests": list(_Recorder.requests)}
    return found


@pytest.mark.parametrize("name", list(hostile_files("http://x")))
def test_hostile_report_is_refused_offline_in_bounded_memory(
    outcomes: dict[str, dict[str, Any]], name: str
) -> None:
    outcome = outcomes[name]
    assert outcome["outcome"] == "refused", outcome
    message = str(outcome["message"])
    assert "refused: DTDs and entities are not allowed" in message, message
    assert message.startswith(outcome["path"]), message
    assert outcome["sockets"] == []
    assert outcomes["_server"]["requests"] == []
    peak, before = int(outcome["peak_kib"]), int(outcome["rss_before_kib"])
    print(f"{name}: refused; peak RSS {peak} KiB, growth {peak - before} KiB")
    assert peak - before < GROWTH_BOUND_KIB, (peak, before)
    assert peak < PEAK_BOUND_KIB, peak
    # Refused means nothing was written: the history holds no run at all.
    assert outcome["runs"] == 0


def test_xinclude_and_stylesheet_hrefs_are_never_fetched(
    outcomes: dict[str, dict[str, Any]],
) -> None:
    """Not refused (plain elements and processing instructions), but nothing is fetched."""
    outcome = outcomes[XINCLUDE]
    assert outcome["outcome"] == "landed", outcome
    assert outcome["message"] == "3 results"
    assert outcome["runs"] == 1
    assert outcome["sockets"] == []
    assert outcomes["_server"]["requests"] == []


# Behind the DOCTYPE refusal, each further line of defence must refuse on its own: with every
# other handler cleared, the files it is there for are still refused before any expansion.
REFUSING_HANDLERS = (
    "StartDoctypeDeclHandler",
    "EntityDeclHandler",
    "UnparsedEntityDeclHandler",
    "ExternalEntityRefHandler",
)
LAYERS = {
    "EntityDeclHandler": [
        "billion-laughs",
        "quadratic-blowup",
        "external-entity-http",
        "external-entity-file",
        "parameter-entity",
        "unparsed-entity",
    ],
    "ExternalEntityRefHandler": ["external-entity-http", "external-entity-file"],
    "UnparsedEntityDeclHandler": ["unparsed-entity"],
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_line_of_defence_refuses_on_its_own(layer: str) -> None:
    files = hostile_files("http://127.0.0.1:9")  # never contacted: refusal comes first
    for name in LAYERS[layer]:
        parser = junit._new_parser(name)
        for handler in REFUSING_HANDLERS:
            if handler != layer:
                setattr(parser, handler, None)
        with pytest.raises(ReportError, match="refused: DTDs and entities are not allowed"):
            parser.Parse(files[name].encode(), True)
