"""A throwaway PostgreSQL cluster (Debian's `postgresql` package, installed by scripts/test) for the tests.

PostgreSQL refuses to run as root: as root the cluster is made and run by the `postgres` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import pytest

from tests.conftest import free_port


def _bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        pytest.fail("PostgreSQL is not installed: scripts/test installs Debian's postgresql package")
    return os.path.dirname(found[-1])


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """`postgresql://elicitgate@127.0.0.1:PORT/elicitgate` on a fresh cluster, stopped afterwards."""
    bindir = _bin()
    root = tempfile.mkdtemp(prefix="elicitgate-pg-")
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
    data, log = os.path.join(root, "data"), os.path.join(root, "log")
    port = free_port()

    def run(*argv: str) -> None:
        done = subprocess.run(_as_owner(list(argv)), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout}{done.stderr}")

    run(f"{bindir}/initdb", "-D", data, "--auth=trust", "--username=elicitgate", "--encoding=UTF8", "--no-sync")
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(f"{bindir}/pg_ctl", "-D", data, "-l", log, "-o", options, "-w", "-t", "60", "start")
    try:
        run(f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "elicitgate", "elicitgate")
        yield f"postgresql://elicitgate@127.0.0.1:{port}/elicitgate"
    finally:
        subprocess.run(_as_owner([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"]),
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
