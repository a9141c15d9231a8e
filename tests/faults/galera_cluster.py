"""Three MariaDB nodes in one Galera cluster, on ports of their own, on this machine.

Debian's ``galera-4`` (``/usr/lib/galera/libgalera_smm.so``) and ``mariadb-server`` (the
``mariadbd`` binary only: the shared server on 3306 and its config are never read or touched).
Everything lives in one folder (default ``/tmp/sagacity-galera``): each node's data dir, its
config file, socket, log and pid file, and ``cluster.json``, which is how ``status`` and ``stop``
(and ``scripts/cluster-galera``) find a running cluster again.

Node ``i`` (0, 1, 2) listens on ``3407 + i`` (SQL), ``4567 + 10 i`` (Galera group traffic),
``4568 + 10 i`` (IST) and ``4444 + 10 i`` (rsync SST); ``--base-port`` moves them all (by the
same offset from 3407). The
first node is bootstrapped with ``--wsrep-new-cluster``, the other two join it (an rsync SST, a
second or so on an empty database). Root has no password over TCP; a database ``test`` exists.

Settings worth knowing (docs/operations.md, "MariaDB Galera"): ``binlog_format=ROW`` and
``innodb_autoinc_lock_mode=2`` (Galera replicates row images; interleaved auto-increment),
``wsrep_sync_wait=1`` (a read waits until this node has applied every write the cluster
committed before it: causal reads across nodes), ``wsrep_retry_autocommit=1`` (Galera's
default: an autocommit statement that fails certification is retried once by the server).

As a script::

    python tests/faults/galera_cluster.py start  [--dir DIR] [--base-port 3407]  # prints the URLs
    python tests/faults/galera_cluster.py status [--dir DIR]
    python tests/faults/galera_cluster.py stop   [--dir DIR]

MariaDB refuses to run as root unless told to, so as root the nodes run as the ``mysql`` user.
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
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

MARIADBD = Path("/usr/sbin/mariadbd")
INSTALL_DB = "mariadb-install-db"
PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
DEFAULT_DIR = Path(os.environ.get("SAGACITY_GALERA_DIR", "/tmp/sagacity-galera"))
DEFAULT_BASE_PORT = 3407
NODES = 3
CLUSTER_NAME = "sagacity"


def binaries_missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if not MARIADBD.exists():
        return f"{MARIADBD} not found (apt-get install mariadb-server)"
    if not PROVIDER.exists():
        return f"{PROVIDER} not found (apt-get install galera-4)"
    for tool in (INSTALL_DB, "rsync"):
        if shutil.which(tool) is None:
            return f"{tool} not found (apt-get install mariadb-server rsync)"
    return None


@dataclass
class Node:
    index: int
    port: int
    gcomm_port: int
    ist_port: int
    sst_port: int

    @property
    def name(self) -> str:
        return f"node{self.index + 1}"

    def url(self, database: str = "test") -> str:
        return f"mysql://root@127.0.0.1:{self.port}/{database}"


@dataclass
class State:
    """What ``cluster.json`` holds: enough for another process to find and stop the cluster."""

    root: str
    nodes: list[Node]
    pids: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> State:
        raw = json.loads((root / "cluster.json").read_text())
        raw["nodes"] = [Node(**n) for n in raw["nodes"]]
        return cls(**raw)

    def save(self) -> None:
        (Path(self.root) / "cluster.json").write_text(json.dumps(asdict(self), indent=1))


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def node_ports(base_port: int) -> list[Node]:
    """The three nodes' ports for ``base_port`` (node1's SQL port): Galera's move with it, 3407
    giving 4567 (group traffic), 4568 (IST) and 4444 (SST)."""
    galera, sst = base_port + 1160, base_port + 1037
    return [Node(i, base_port + i, galera + 10 * i, galera + 1 + 10 * i, sst + 10 * i) for i in range(NODES)]


def free_base_port() -> int:
    """A base port whose every port is free now, below the kernel's ephemeral range: for tests
    that run beside others (pytest-xdist, a cluster from ``scripts/cluster-galera``)."""
    while True:
        base = random.randrange(20000, 30000, 10)
        if not any(
            _port_taken(port)
            for node in node_ports(base)
            for port in (node.port, node.gcomm_port, node.ist_port, node.sst_port)
        ):
            return base


class GaleraCluster:
    """Start, inspect, fault and stop the cluster in ``root``."""

    def __init__(self, root: Path | None = None, base_port: int = DEFAULT_BASE_PORT) -> None:
        self.root = Path(root or DEFAULT_DIR)
        self.base_port = base_port
        self._as_mysql = os.geteuid() == 0
        self.state: State | None = State.load(self.root) if (self.root / "cluster.json").exists() else None
        #: The servers this object started (kept so they are reaped, not left as zombies).
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # -- addresses ---------------------------------------------------------------------------

    def _state(self) -> State:
        if self.state is None:
            raise RuntimeError(f"no Galera cluster in {self.root} (start one first)")
        return self.state

    @property
    def nodes(self) -> list[Node]:
        return self._state().nodes

    def urls(self, database: str = "test") -> list[str]:
        return [node.url(database) for node in self.nodes]

    def _gcomm(self) -> str:
        return "gcomm://" + ",".join(f"127.0.0.1:{n.gcomm_port}" for n in self.nodes)

    # -- starting ----------------------------------------------------------------------------

    def _config(self, node: Node) -> Path:
        folder = self.root / node.name
        provider_options = ";".join(
            [
                f"gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm_port}",
                f"ist.recv_addr=127.0.0.1:{node.ist_port}",
                "gcache.size=64M",
                # A killed peer is declared gone after a few seconds, not Galera's default
                # (evs.suspect_timeout PT5S, inactive PT15S), so a test's node loss is quick.
                "evs.suspect_timeout=PT3S",
                "evs.inactive_timeout=PT6S",
            ]
        )
        # A tmpdir of its own: mariadbd deletes every ``#sql*`` file in its tmpdir when it starts,
        # so a node restarted with /tmp (the default) deleted the live temporary tables of the
        # shared server on 3306 under other tests (seen in CI: "Error on delete of
        # '/tmp/#sql-temptable-...MAI'" in an unrelated MariaDB test's teardown).
        config = f"""[mariadbd]
datadir={folder / "data"}
tmpdir={folder / "tmp"}
socket={folder / "mysqld.sock"}
pid-file={folder / "mysqld.pid"}
log-error={folder / "error.log"}
port={node.port}
bind-address=127.0.0.1
skip-name-resolve
max_connections=300
innodb_buffer_pool_size=64M
innodb_log_file_size=48M
innodb_flush_log_at_trx_commit=1
default_storage_engine=InnoDB
binlog_format=ROW
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider={PROVIDER}
wsrep_cluster_name={CLUSTER_NAME}
wsrep_cluster_address={self._gcomm()}
wsrep_node_name={node.name}
wsrep_node_address=127.0.0.1:{node.gcomm_port}
wsrep_node_incoming_address=127.0.0.1:{node.port}
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:{node.sst_port}
wsrep_provider_options="{provider_options}"
wsrep_sync_wait=1
wsrep_retry_autocommit=1
wsrep_slave_threads=2
"""
        path = folder / "my.cnf"
        path.write_text(config)
        return path

    def _chown(self, path: Path) -> None:
        if self._as_mysql:
            entry = pwd.getpwnam("mysql")
            for sub in [path, *path.rglob("*")]:
                os.chown(sub, entry.pw_uid, entry.pw_gid)

    def _spawn(self, node: Node, *extra: str) -> int:
        folder = self.root / node.name
        command = [str(MARIADBD), f"--defaults-file={folder / 'my.cnf'}", *extra]
        if self._as_mysql:
            command.append("--user=mysql")
        with (folder / "stdout.log").open("ab") as log:
            proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
            )
        self._procs[proc.pid] = proc
        state = self._state()
        state.pids[node.name] = proc.pid
        state.save()
        return proc.pid

    def start(self, timeout: float = 90) -> None:
        """Make the three data dirs, bootstrap node1, join node2 and node3; return once all
        three are synced members of one primary component, with root over TCP and ``test``."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        nodes = node_ports(self.base_port)
        for node in nodes:
            for port in (node.port, node.gcomm_port, node.ist_port, node.sst_port):
                if _port_taken(port):
                    raise RuntimeError(f"port {port} is taken: is another cluster running? (--base-port)")
        self.state = State(str(self.root), nodes)
        self.state.save()
        template = self.root / "template"
        # The bootstrap server mariadb-install-db runs takes its tmpdir from TMPDIR: /tmp would
        # lose the shared server's temporary tables, as a node's would (see ``_config``).
        scratch = self.root / "tmp"
        scratch.mkdir(exist_ok=True)
        self._chown(scratch)
        subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={template}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *(["--user=mysql"] if self._as_mysql else []),
            ],
            check=True,
            capture_output=True,
            timeout=120,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        for node in nodes:
            folder = self.root / node.name
            folder.mkdir(exist_ok=True)
            (folder / "tmp").mkdir(exist_ok=True)
            if node.index == 0:
                template.rename(folder / "data")
            else:
                (folder / "data").mkdir()  # filled by an SST from a donor
            self._config(node)
            self._chown(folder)
        first = nodes[0]
        self._spawn(first, "--wsrep-new-cluster")
        self._wait(lambda: self._synced(first), timeout, f"{first.name} bootstrapped")
        self._sql(
            first,
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; "
            "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; "
            "CREATE DATABASE IF NOT EXISTS test",
        )
        for node in nodes[1:]:
            self._spawn(node)
            self._wait(lambda node=node: self._synced(node), timeout, f"{node.name} joined")  # type: ignore[misc]
        self.wait_healthy(timeout)

    def _wait(self, condition: object, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():  # type: ignore[operator]
                return
            for name, pid in self._state().pids.items():
                if pid in self._procs and self._procs[pid].poll() is not None:
                    raise RuntimeError(f"{name} exited while waiting for: {what}\n{self.logs()}")
            time.sleep(0.2)
        raise RuntimeError(f"Galera cluster in {self.root}: not {what} within {seconds:g} s\n{self.logs()}")

    def _sql(self, node: Node, statements: str) -> str:
        """Run ``statements`` on ``node`` through its socket as root; their output."""
        result = subprocess.run(
            [
                "mariadb",
                "--no-defaults",
                f"--socket={self.root / node.name / 'mysqld.sock'}",
                "-uroot",
                "-N",
                "-B",
                "-e",
                statements,
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return result.stdout

    # -- inspecting --------------------------------------------------------------------------

    def status_of(self, node: Node) -> dict[str, str]:
        """A node's wsrep status (``wsrep_local_state_comment``, ``wsrep_cluster_size``, ...), or
        {} when it does not answer."""
        try:
            out = self._sql(node, "SHOW GLOBAL STATUS LIKE 'wsrep_%'")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return {}
        return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)

    def _synced(self, node: Node) -> bool:
        status = self.status_of(node)
        return status.get("wsrep_local_state_comment") == "Synced" and status.get("wsrep_ready") == "ON"

    def running(self) -> list[Node]:
        state = self._state()
        return [n for n in state.nodes if n.name in state.pids and _alive(state.pids[n.name], self._procs)]

    def wait_healthy(self, timeout: float = 90) -> None:
        """Every node running, synced, and in one primary component of all three."""

        def healthy() -> bool:
            for node in self.nodes:
                status = self.status_of(node)
                if not (
                    status.get("wsrep_local_state_comment") == "Synced"
                    and status.get("wsrep_cluster_status") == "Primary"
                    and status.get("wsrep_cluster_size") == str(NODES)
                ):
                    return False
            return True

        self._wait(healthy, timeout, "three synced nodes")

    def status(self) -> str:
        lines = []
        for node in self.nodes:
            status = self.status_of(node)
            if not status:
                lines.append(f"{node.name} {node.url()}: down")
                continue
            lines.append(
                f"{node.name} {node.url()}: {status.get('wsrep_local_state_comment')}, "
                f"{status.get('wsrep_cluster_status')} component of {status.get('wsrep_cluster_size')}"
            )
        return "\n".join(lines) + "\n"

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(
            f"--- {log.parent.name}/{log.name}\n{log.read_text(errors='replace')[-tail:]}"
            for log in sorted(self.root.glob("node*/*.log"))
        )

    # -- faults --------------------------------------------------------------------------------

    def kill(self, node: Node) -> None:
        """SIGKILL a node's server: the others see it leave after evs.suspect_timeout."""
        pid = self._state().pids.pop(node.name, None)
        if pid is not None:
            _signal(pid, signal.SIGKILL)
            _reap(pid, self._procs, 30)
        self._state().save()

    def restart(self, node: Node, timeout: float = 90) -> None:
        """Start a killed node again: it rejoins (IST or SST from a donor) and syncs."""
        self._spawn(node)
        self._wait(lambda: self._synced(node), timeout, f"{node.name} rejoined")

    # -- stopping ------------------------------------------------------------------------------

    def stop(self, remove: bool = True) -> None:
        """Stop every node it started (SIGTERM, then SIGKILL after 20 s), remove the folder."""
        state = self._state()
        pids = list(state.pids.values())
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while any(_alive(pid, self._procs) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in pids:
            _signal(pid, signal.SIGKILL)
            _reap(pid, self._procs, 10)
        # An SST leaves helpers (rsync daemons, wsrep_sst_rsync) in the node's session: end those.
        for node in state.nodes:
            pidfile = self.root / node.name / "data" / "rsync_sst.pid"
            if pidfile.exists():
                try:
                    _signal(int(pidfile.read_text().split()[0]), signal.SIGKILL)
                except ValueError:
                    pass
        state.pids.clear()
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            state.save()
        self.state = None


def _alive(pid: int, procs: dict[int, subprocess.Popen[bytes]]) -> bool:
    if pid in procs:
        return procs[pid].poll() is None
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie (its parent, an earlier start, gone) counts as dead
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (OSError, IndexError):
        return False


def _reap(pid: int, procs: dict[int, subprocess.Popen[bytes]], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _alive(pid, procs) and time.monotonic() < deadline:
        time.sleep(0.05)


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass  # gone already


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A three-node MariaDB Galera cluster on this machine.")
    parser.add_argument("action", choices=("start", "status", "stop"))
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"its folder (default {DEFAULT_DIR})")
    parser.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, help="node1's SQL port")
    args = parser.parse_args(argv)
    missing = binaries_missing()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    if args.action == "start":
        if (args.dir / "cluster.json").exists():
            print(f"a cluster is already in {args.dir}; stop it first", file=sys.stderr)
            return 1
        cluster = GaleraCluster(args.dir, args.base_port)
        try:
            cluster.start()
        except BaseException:
            if cluster.state is not None:
                cluster.stop()
            raise
        print("\n".join(cluster.urls()))
        return 0
    if not (args.dir / "cluster.json").exists():
        print(f"no cluster in {args.dir}", file=sys.stderr)
        return 1
    cluster = GaleraCluster(args.dir)
    if args.action == "status":
        print(cluster.status(), end="")
    else:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
