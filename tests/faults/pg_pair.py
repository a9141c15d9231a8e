"""A PostgreSQL primary and a synchronous standby on ports of their own, in a temp folder.

Plain streaming replication (``pg_basebackup -R``) and a manual ``pg_ctl promote``: a failover
whose every step the test controls, in a few seconds and two processes' worth of CPU, where a
failover manager (pg_auto_failover's monitor and keepers) adds a third server, its own health
checks and tens of seconds of detection delay that say nothing about the library. The library
sees the same thing either way: its connections die, and a multi-host DSN with
``target_session_attrs=read-write`` finds the new primary.

PostgreSQL refuses to run as root, so as root every server command runs as the ``postgres``
system user (``runuser``), in a folder that user owns.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

#: Debian's PostgreSQL 15 server binaries (package postgresql-15).
BIN = Path(os.environ.get("SAGACITY_PG_BIN", "/usr/lib/postgresql/15/bin"))
#: The standby's name on the primary's ``synchronous_standby_names``.
STANDBY_NAME = "sagacity_standby"


def binaries_missing() -> str | None:
    """Why a pair cannot be started here, or None."""
    for tool in ("initdb", "pg_ctl", "pg_basebackup", "postgres"):
        if not (BIN / tool).exists():
            return f"PostgreSQL server binaries not found ({BIN / tool}; apt-get install postgresql-15)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the servers as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")".
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(proc.name))
    return found


class PgPair:
    """Two servers: ``primary`` streams to ``standby``, whose flush every commit waits for."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="sagacity-ha-"))
        self.primary = self.root / "primary"
        self.standby = self.root / "standby"
        self.primary_port = free_port()
        self.standby_port = free_port()
        self._as_postgres = os.geteuid() == 0
        self._orphans: list[int] = []
        #: Settings of both servers (and of every standby cloned later).
        self._common = [
            "listen_addresses = '127.0.0.1'",
            f"unix_socket_directories = '{self.root}'",
            "shared_buffers = '32MB'",
            "max_connections = 100",
            "fsync = on",
            "synchronous_commit = on",
        ]
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o755)

    @property
    def url(self) -> str:
        """The multi-host DSN an application uses: whichever host takes writes."""
        return (
            f"postgresql://postgres@127.0.0.1:{self.primary_port},127.0.0.1:{self.standby_port}"
            "/postgres?target_session_attrs=read-write"
        )

    def host_url(self, port: int) -> str:
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _run(self, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(a) for a in args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=check, capture_output=True, text=True, timeout=120)

    def _configure(self, data: Path, lines: list[str]) -> None:
        # postgresql.auto.conf is read last: what is written here wins over what was copied.
        with (data / "postgresql.auto.conf").open("a") as conf:
            conf.write("\n".join(lines) + "\n")

    def _start(self, data: Path) -> None:
        result = self._run(
            BIN / "pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", data / "log", check=False
        )
        if result.returncode != 0:
            log = (data / "log").read_text(errors="replace") if (data / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start {data} failed: {result.stdout}{result.stderr}\n{log[-2000:]}")

    def start(self) -> None:
        """initdb, start the primary, clone it with pg_basebackup, start the standby, and wait
        until the primary reports it as its synchronous standby."""
        self._run(BIN / "initdb", "-D", self.primary, "-U", "postgres", "-A", "trust", "--no-sync")
        self._configure(
            self.primary,
            [
                *self._common,
                f"port = {self.primary_port}",
                "wal_level = replica",
                "max_wal_senders = 4",
                f"synchronous_standby_names = 'FIRST 1 ({STANDBY_NAME})'",
            ],
        )
        self._start(self.primary)
        self._clone_standby()
        self._wait_for_sync()

    def _clone_standby(self) -> None:
        """pg_basebackup the primary into the standby's folder and start it streaming."""
        self._run(
            BIN / "pg_basebackup",
            "-D",
            self.standby,
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary_port),
            "-U",
            "postgres",
            "-X",
            "stream",
            "-R",
            "-c",
            "fast",
        )
        self._configure(
            self.standby,
            [
                *self._common,
                f"port = {self.standby_port}",
                "primary_conninfo = "
                f"'host=127.0.0.1 port={self.primary_port} user=postgres application_name={STANDBY_NAME}'",
                # Once promoted it is alone: with the primary's setting it would wait for a
                # standby that does not exist, and every commit would hang.
                "synchronous_standby_names = ''",
            ],
        )
        self._start(self.standby)

    def _wait_for_sync(self) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        with psycopg.connect(self.host_url(self.primary_port), autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
                    (STANDBY_NAME,),
                ).fetchone()
                if row is not None and row[0] == "sync":
                    return
                time.sleep(0.1)
        raise RuntimeError("the standby never became the primary's synchronous standby")

    def postmaster_pid(self, data: Path) -> int:
        return int((data / "postmaster.pid").read_text().split()[0])

    def kill_primary(self) -> int:
        """SIGKILL the primary's postmaster (its backends exit as they notice); its pid."""
        pid = self.postmaster_pid(self.primary)
        self._orphans.extend(_children(pid))
        os.kill(pid, signal.SIGKILL)
        return pid

    def promote(self) -> None:
        """Make the standby the primary and wait until it takes writes."""
        self._run(BIN / "pg_ctl", "promote", "-w", "-t", "60", "-D", self.standby)

    def fail_over(self, no_primary_for: float = 1.0) -> None:
        """Kill the primary, promote the standby, and make the dead primary's folder and port a
        synchronous standby of the new one again, so the next failover has somewhere to go.
        The DSN (both ports) stays valid throughout; the roles swap."""
        self.kill_primary()
        time.sleep(no_primary_for)
        self.promote()
        self.primary, self.standby = self.standby, self.primary
        self.primary_port, self.standby_port = self.standby_port, self.primary_port
        self._kill_leftovers()
        shutil.rmtree(self.standby)
        self._clone_standby()
        import psycopg

        with psycopg.connect(self.host_url(self.primary_port), autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ({STANDBY_NAME})'")
            conn.execute("SELECT pg_reload_conf()")
        self._wait_for_sync()

    def stop(self) -> None:
        """Stop both servers (immediate: nothing to keep) and remove the folder."""
        for data in (self.primary, self.standby):
            if (data / "postmaster.pid").exists():
                self._run(BIN / "pg_ctl", "stop", "-m", "immediate", "-D", data, check=False)
        self._kill_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_leftovers(self) -> None:
        """Backends of the SIGKILLed postmaster that have not exited yet."""
        for pid in self._orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # gone already
        self._orphans.clear()
