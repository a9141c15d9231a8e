"""Two PostgreSQL 15 nodes under Patroni, with one etcd as its store, on ports of their own.

Debian's ``patroni`` and ``etcd-server``: the failover manager teams deploy, so a failover is
decided by Patroni (its leader key in etcd, ``synchronous_mode``), not by the test. Everything
lives in one folder (default a temp dir): etcd's data, each node's Patroni config, data dir and
log. Ports are free ones picked at start and written to ``cluster.json`` there, which is how
``status`` and ``stop`` (and ``scripts/cluster-patroni``) find a running cluster again.

Settings worth knowing (docs/operations.md, "PostgreSQL under Patroni"):
``synchronous_mode: true`` (a commit waits for the synchronous standby's flush, and only that
standby may be promoted), ``synchronous_mode_strict`` with ``strict=True`` (``start --strict``:
with no synchronous standby, commits wait instead of going on unreplicated),
``primary_start_timeout: 0`` (a crashed primary fails over at once
instead of being restarted in place), ``ttl: 20, loop_wait: 2, retry_timeout: 5`` (detection in
seconds, not Patroni's default tens of seconds).

As a script::

    python tests/faults/patroni_cluster.py start  [--dir DIR] [--strict]   # prints the DSN
    python tests/faults/patroni_cluster.py status [--dir DIR]
    python tests/faults/patroni_cluster.py stop   [--dir DIR]

Patroni and PostgreSQL refuse to run as root, so as root they run as the ``postgres`` user.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import pg_pair  # noqa: E402

sys.path.remove(str(HERE))

SCOPE = "sagacity"
NODES = ("node1", "node2")
DEFAULT_DIR = Path(os.environ.get("SAGACITY_PATRONI_DIR", Path(tempfile.gettempdir()) / "sagacity-patroni"))


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range (32768 and up): a server restarted by
    Patroni binds its port again, and an ephemeral one may by then be some client's."""
    while True:
        port = random.randint(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def binaries_missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    for tool in ("patroni", "patronictl", "etcd"):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install patroni etcd-server)"
    return pg_pair.binaries_missing()


@dataclass
class Node:
    name: str
    pg_port: int
    rest_port: int

    @property
    def rest(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"


@dataclass
class State:
    """What ``cluster.json`` holds: enough for another process to find and stop the cluster."""

    root: str
    etcd_client: int
    etcd_peer: int
    nodes: list[Node]
    pids: dict[str, int]

    @classmethod
    def load(cls, root: Path) -> State:
        raw = json.loads((root / "cluster.json").read_text())
        raw["nodes"] = [Node(**n) for n in raw["nodes"]]
        return cls(**raw)

    def save(self) -> None:
        (Path(self.root) / "cluster.json").write_text(json.dumps(asdict(self), indent=1))


class PatroniCluster:
    """Start, inspect, fault and stop the cluster in ``root``."""

    def __init__(self, root: Path | None = None, *, strict: bool = False) -> None:
        """``strict``: ``synchronous_mode_strict: true`` in the configuration ``start`` writes."""
        self.root = Path(root or tempfile.mkdtemp(prefix="sagacity-patroni-"))
        self.strict = strict
        self._as_postgres = os.geteuid() == 0
        self.state: State | None = State.load(self.root) if (self.root / "cluster.json").exists() else None
        #: The processes this object started (kept so they are reaped, not warned about).
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # -- addresses ---------------------------------------------------------------------------

    def _state(self) -> State:
        if self.state is None:
            raise RuntimeError(f"no cluster in {self.root} (start one first)")
        return self.state

    def url(self, database: str = "postgres") -> str:
        """The application's DSN: both nodes, libpq keeps the one that takes writes."""
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in self._state().nodes)
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def node_url(self, node: Node) -> str:
        return f"postgresql://postgres@127.0.0.1:{node.pg_port}/postgres"

    def node(self, name: str) -> Node:
        return next(n for n in self._state().nodes if n.name == name)

    # -- starting ----------------------------------------------------------------------------

    def _spawn(self, name: str, command: list[str]) -> int:
        # Popen's user= rather than runuser: the pid recorded is the server's own.
        user = pwd.getpwnam("postgres") if self._as_postgres else None
        env = {**os.environ, "HOME": user.pw_dir} if user else None
        with (self.root / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
                user=user.pw_uid if user else None,
                group=user.pw_gid if user else None,
                extra_groups=[] if user else None,
                env=env,
            )
        self._procs[proc.pid] = proc
        return proc.pid

    def _config(self, node: Node, state: State) -> Path:
        data = self.root / node.name
        config = {
            "scope": SCOPE,
            "namespace": "/sagacity/",
            "name": node.name,
            "restapi": {
                "listen": f"127.0.0.1:{node.rest_port}",
                "connect_address": f"127.0.0.1:{node.rest_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{state.etcd_client}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": 20,
                    "loop_wait": 2,
                    "retry_timeout": 5,
                    "primary_start_timeout": 0,
                    "synchronous_mode": True,
                    "synchronous_mode_strict": self.strict,
                    "maximum_lag_on_failover": 1048576,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 5,
                            "max_replication_slots": 5,
                            "synchronous_commit": "on",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}, {"username": "postgres"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}",
                "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(data),
                "bin_dir": str(pg_pair.BIN),
                "pgpass": str(self.root / f"{node.name}.pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "postgres"},
                    "rewind": {"username": "postgres"},
                },
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
                "parameters": {
                    "unix_socket_directories": str(self.root),
                    "shared_buffers": "32MB",
                    "max_connections": 100,
                    "fsync": "on",
                },
            },
        }
        path = self.root / f"{node.name}.yml"
        path.write_text(json.dumps(config, indent=1))  # JSON is YAML
        return path

    def start(self, timeout: float = 120) -> None:
        """Start etcd and both Patroni nodes; return once there is a leader and a synchronous
        standby streaming to it."""
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o755)
        state = State(str(self.root), free_port(), free_port(), [], {})
        state.nodes = [Node(name, free_port(), free_port()) for name in NODES]
        self.state = state
        peer = f"http://127.0.0.1:{state.etcd_peer}"
        state.pids["etcd"] = self._spawn(
            "etcd",
            [
                "etcd",
                "--name=sagacity",
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{state.etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{state.etcd_client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=sagacity={peer}",
            ],
        )
        state.save()
        self._wait(lambda: _get(f"http://127.0.0.1:{state.etcd_client}/health") == 200, 30, "etcd answers")
        for node in state.nodes:
            state.pids[node.name] = self._spawn(node.name, ["patroni", str(self._config(node, state))])
            state.save()
            if node is state.nodes[0]:  # the first one bootstraps; the second clones it
                self._wait(lambda: self.leader() is not None, timeout, "a leader")
        self.wait_healthy(timeout)

    def _wait(self, condition: object, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():  # type: ignore[operator]
                return
            time.sleep(0.2)
        raise RuntimeError(f"Patroni cluster in {self.root}: no {what} within {seconds:g} s\n{self.logs()}")

    # -- inspecting --------------------------------------------------------------------------

    def leader(self) -> Node | None:
        """The node whose Patroni holds the leader key and runs a writable primary."""
        for node in self._state().nodes:
            if _get(f"{node.rest}/leader") == 200:
                return node
        return None

    def sync_standby(self) -> Node | None:
        """The node the leader's Patroni lists as its synchronous standby, running (asked of the
        leader: a node's own ``/sync`` answers from its last loop, stale just after a failover)."""
        leader = self.leader()
        if leader is None:
            return None
        try:
            with urllib.request.urlopen(f"{leader.rest}/cluster", timeout=2) as response:
                members = json.load(response)["members"]
        except (OSError, ValueError, KeyError):
            return None
        for member in members:
            if member.get("role") == "sync_standby" and member.get("state") in ("running", "streaming"):
                return self.node(str(member["name"]))
        return None

    def wait_healthy(self, timeout: float = 120) -> None:
        """A leader and a streaming synchronous standby."""
        self._wait(
            lambda: self.leader() is not None and self.sync_standby() is not None, timeout, "sync standby"
        )

    def status(self) -> str:
        result = subprocess.run(
            ["patronictl", "-c", str(self.root / f"{NODES[0]}.yml"), "list"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return result.stdout + result.stderr

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-tail:]}"
            for log in sorted(self.root.glob("*.log"))
        )

    # -- faults --------------------------------------------------------------------------------

    def kill_leader_postmaster(self, leader: Node | None = None) -> Node:
        """SIGKILL the leader's postmaster (not Patroni): the crash Patroni fails over from.
        ``leader`` names it when Patroni is paused (its REST API does not answer then)."""
        leader = leader or self.leader()
        if leader is None:
            raise RuntimeError("no leader to kill")
        pid = int((self.root / leader.name / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        return leader

    def stop_leader_patroni(self) -> Node:
        """SIGTERM the leader's Patroni, as ``systemctl stop patroni`` does: it stops its
        PostgreSQL and gives up the leader key. ``start_node`` brings it back."""
        leader = self.leader()
        if leader is None:
            raise RuntimeError("no leader to stop")
        return self.stop_node(leader)

    def stop_node(self, node: Node) -> Node:
        """SIGTERM ``node``'s Patroni (which stops its PostgreSQL) and wait until it has exited:
        for the synchronous standby, the standby gone. ``start_node`` brings it back."""
        self._end_patroni(node, signal.SIGTERM)
        return node

    def kill_node(self, node: Node) -> Node:
        """SIGKILL ``node``'s Patroni, then its postmaster: the machine gone, with no goodbye to
        etcd or the leader. ``start_node`` brings it back (PostgreSQL recovers from the crash)."""
        deadline = self._end_patroni(node, signal.SIGKILL)
        pidfile = self.root / node.name / "postmaster.pid"
        if pidfile.exists():
            postmaster = int(pidfile.read_text().split()[0])
            _signal(postmaster, signal.SIGKILL)
            while _alive(postmaster, self._procs) and time.monotonic() < deadline:
                time.sleep(0.1)
        return node

    def take_sync_standby_away(self, how: str) -> tuple[Node, Node]:
        """Stop (``"stopped"``: SIGTERM to its Patroni) or kill (``"killed"``: SIGKILL to its
        Patroni and postmaster) the synchronous standby; the leader and that standby."""
        leader, standby = self.leader(), self.sync_standby()
        if leader is None or standby is None:
            raise RuntimeError(f"no leader or synchronous standby to take away:\n{self.status()}")
        (self.stop_node if how == "stopped" else self.kill_node)(standby)
        return leader, standby

    def _end_patroni(self, node: Node, sig: signal.Signals) -> float:
        """Send ``sig`` to ``node``'s Patroni and wait (up to 60 s) until it has exited; forget
        its pid. The deadline, for what the caller waits on next."""
        pid = self._state().pids.pop(node.name)
        _signal(pid, sig)
        deadline = time.monotonic() + 60
        while _alive(pid, self._procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        self._state().save()
        return deadline

    def pause_patroni(self, paused: bool) -> None:
        """SIGSTOP (or SIGCONT) every node's Patroni: PostgreSQL runs on, but nothing restarts
        or promotes it, so a fault lasts as long as the test wants."""
        state = self._state()
        for node in state.nodes:
            if node.name in state.pids:
                _signal(state.pids[node.name], signal.SIGSTOP if paused else signal.SIGCONT)

    def start_node(self, node: Node) -> None:
        """Start a stopped node's Patroni again (it rejoins as a replica)."""
        state = self._state()
        state.pids[node.name] = self._spawn(node.name, ["patroni", str(self.root / f"{node.name}.yml")])
        state.save()

    def switchover(self) -> Node:
        """A planned ``patronictl switchover`` to the synchronous standby; the new leader."""
        leader, candidate = self.leader(), self.sync_standby()
        if leader is None or candidate is None:
            raise RuntimeError("switchover needs a leader and a synchronous standby")
        subprocess.run(
            [
                "patronictl",
                "-c",
                str(self.root / f"{leader.name}.yml"),
                "switchover",
                SCOPE,
                f"--leader={leader.name}",
                f"--candidate={candidate.name}",
                "--force",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return candidate

    # -- stopping ------------------------------------------------------------------------------

    def stop(self, remove: bool = True) -> None:
        """Stop both Patroni nodes (each stops its PostgreSQL), then etcd; kill what is left;
        remove the folder."""
        state = self._state()
        nodes = [state.pids[n.name] for n in state.nodes if n.name in state.pids]
        for pid in nodes:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while any(_alive(pid, self._procs) for pid in nodes) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in nodes:
            _signal(pid, signal.SIGKILL)
        for node in state.nodes:  # a postmaster Patroni did not stop (or one left by a kill)
            pidfile = self.root / node.name / "postmaster.pid"
            if pidfile.exists():
                subprocess.run(
                    (["runuser", "-u", "postgres", "--"] if self._as_postgres else [])
                    + [
                        str(pg_pair.BIN / "pg_ctl"),
                        "stop",
                        "-m",
                        "immediate",
                        "-D",
                        str(self.root / node.name),
                    ],
                    check=False,
                    capture_output=True,
                    timeout=60,
                )
        if "etcd" in state.pids:
            _signal(state.pids["etcd"], signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _alive(state.pids["etcd"], self._procs) and time.monotonic() < deadline:
                time.sleep(0.1)
            _signal(state.pids["etcd"], signal.SIGKILL)
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)
        self.state = None


def for_tests(*, strict: bool = False) -> Iterator[PatroniCluster]:
    """A test module's cluster (a fixture's body): skipped without ``SAGACITY_TEST_PATRONI=1``,
    failed when it is set but a binary is missing, stopped and removed afterwards."""
    import pytest

    if os.environ.get("SAGACITY_TEST_PATRONI") != "1":
        pytest.skip(
            "set SAGACITY_TEST_PATRONI=1 to run the Patroni failover tests "
            "(apt-get install patroni etcd-server postgresql-15)"
        )
    missing = binaries_missing()
    if missing:
        pytest.fail(f"SAGACITY_TEST_PATRONI=1 but {missing}")
    servers = PatroniCluster(strict=strict)
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


def database_for(cluster: PatroniCluster, test_name: str) -> str:
    """A database of the test's own on a healthy cluster (the journal holds only its sagas): its URL."""
    import psycopg

    cluster.wait_healthy()
    name = test_name.removeprefix("test_")
    name = f"{name[:32]}_{zlib.crc32(name.encode()):08x}"  # a parametrized test's ids apart
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return cluster.url(name)


def _get(url: str) -> int | None:
    """The HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


def _alive(pid: int, procs: dict[int, subprocess.Popen[bytes]]) -> bool:
    """Whether ``pid`` runs: asked of its Popen if this process started it (which reaps it),
    else of the kernel (started by ``start`` in another process)."""
    if pid in procs:
        return procs[pid].poll() is None
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass  # gone already


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A two-node Patroni PostgreSQL cluster on this machine.")
    parser.add_argument("action", choices=("start", "status", "stop"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"its folder (default {DEFAULT_DIR})")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="start with synchronous_mode_strict: true (no synchronous standby: commits wait)",
    )
    args = parser.parse_args(argv)
    missing = binaries_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    if args.action == "start":
        if (args.dir / "cluster.json").exists():
            print(f"a cluster is already in {args.dir}; stop it first", file=sys.stderr)
            return 1
        args.dir.mkdir(parents=True, exist_ok=True)
        cluster = PatroniCluster(args.dir, strict=args.strict)
        try:
            cluster.start()
        except BaseException:
            cluster.stop()
            raise
        print(cluster.url())
        return 0
    if not (args.dir / "cluster.json").exists():
        print(f"no cluster in {args.dir}", file=sys.stderr)
        return 1
    cluster = PatroniCluster(args.dir)
    if args.action == "status":
        print(cluster.url())
        print(cluster.status(), end="")
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
