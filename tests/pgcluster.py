"""A throwaway PostgreSQL cluster for the tests: its own data directory in a temporary
directory, a free port on 127.0.0.1 and a socket directory of its own, run as an unprivileged
user when the tests run as root, stopped at the end of the session.

The binaries are looked up with PG_BINDIR, then `initdb` on PATH, then Debian's
/usr/lib/postgresql/<version>/bin; without them the PostgreSQL tests skip with one line.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER = "flaketui"
START_TIMEOUT_S = 60


def find_bindir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres, or None."""
    candidates = []
    if os.environ.get("PG_BINDIR"):
        candidates.append(Path(os.environ["PG_BINDIR"]))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    candidates.extend(Path(p) for p in versions)
    for bindir in candidates:
        if all((bindir / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """One running cluster; `url(db)` names a database on it with the superuser's password."""

    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.root = root
        self.data = root / "data"
        self.password = "pw-" + secrets.token_hex(8)
        self.port = 0
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            # The server refuses to run as root: run it as nobody, which owns its directory.
            self.as_user = ["runuser", "-u", "nobody", "--"]
            shutil.chown(root, "nobody")
        root.chmod(0o755)

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self.as_user, *args], check=True, capture_output=True, timeout=START_TIMEOUT_S
        )

    def init(self) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if self.as_user:
            shutil.chown(pwfile, "nobody")
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", USER, "--no-sync",
            "-E", "UTF8", "--auth-local=trust", "--auth-host=scram-sha-256",
            f"--pwfile={pwfile}",
        )  # fmt: skip
        pwfile.unlink()

    def start(self) -> None:
        last: Exception | None = None
        for _ in range(3):  # a port taken between picking and binding: pick another
            self.port = self.port or _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root}"
                " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                " -c max_connections=120 -c shared_buffers=32MB"
            )
            try:
                self._run(
                    str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
                    "-l", str(self.root / "server.log"), "-w", "-t", str(START_TIMEOUT_S), "start",
                )  # fmt: skip
                return
            except subprocess.CalledProcessError as exc:
                last = exc
                self.port = 0
        raise RuntimeError(f"PostgreSQL did not start: {last}")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self) -> None:
        """Stop (cutting every session) and start again on the same port."""
        self.stop("fast")
        self.start()

    def url(self, database: str = "postgres", *, password: bool = True) -> str:
        secret = f":{self.password}" if password else ""
        return f"postgresql://{USER}{secret}@127.0.0.1:{self.port}/{database}"

    def socket_url(self, database: str = "postgres", *, password: bool = True) -> str:
        """`url(database)` as libpq names a local socket: no host, the socket's directory, port
        and user in the query string (the password too, when asked)."""
        secret = f"&password={self.password}" if password else ""
        return f"postgresql:///{database}?host={self.root}&port={self.port}&user={USER}{secret}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextmanager
def running_cluster(bindir: Path) -> Iterator[Cluster]:
    """Start a cluster for the duration of the block, always stopping it and removing its files."""
    root = Path(tempfile.mkdtemp(prefix="flaketui-pg-"))
    cluster = Cluster(bindir, root)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        try:
            if (cluster.data / "postmaster.pid").exists():
                cluster.stop("immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)
