"""A throwaway PostgreSQL 15 server in a temp folder, for the multi-worker storage test.

The tests run as root and PostgreSQL refuses to run as root, so the server runs as the
``postgres`` system user (``runuser``); it listens on a unix socket in its own folder only.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path("/usr/lib/postgresql/15/bin")


def unavailable() -> str | None:
    """Why no server can be started here (None when it can)."""
    if not (BIN / "initdb").exists():
        return "PostgreSQL 15 server binaries are not installed (apt-get install postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to drop to the postgres user"
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return "no postgres system user to run the server as"
    return None


def _as_postgres(*cmd: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else list(cmd)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def pg_server() -> Iterator[str]:
    """Start a server, yield a SQLAlchemy URL of an empty database, stop and delete it after.

    Its folder lives directly in the system temp dir: pytest's own tmp folders are private to
    root, and the server user must reach its files."""
    root = Path(tempfile.mkdtemp(prefix="hwnas-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        for path in (root, sock):
            shutil.chown(path, "postgres")
    port = _free_port()
    subprocess.run(_as_postgres(str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U",
                                "postgres"), check=True, capture_output=True)
    opts = f"-k {sock} -p {port} -c listen_addresses='' -c fsync=off"
    subprocess.run(_as_postgres(str(BIN / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-l",
                                str(root / "log.txt"), "start"), check=True, capture_output=True)
    try:
        subprocess.run(_as_postgres(str(BIN.parent / "bin" / "createdb"), "-h", str(sock), "-p",
                                    str(port), "hwnas"), check=True, capture_output=True)
        yield f"postgresql+psycopg2://postgres@/hwnas?host={sock}&port={port}"
    finally:
        subprocess.run(_as_postgres(str(BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                                    "stop"), capture_output=True)
        time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)
