"""A whole Arbiter deployment on loopback, from real packages (issue 28; docs/deploy.md).

    HAProxy (Debian) -> two gunicorn web nodes -> PgBouncer (Debian, transaction pooling)
    -> the machine's PostgreSQL (own database); the machine's Redis (own db number) as broker and
    cache; two Celery worker nodes and exactly one ``celery beat`` (the judge-lease sweep); media
    on a directory every node shares, or in an S3 bucket on moto's server (PyPI ``moto[server]``).

Every process runs under the run directory (``var/cluster/`` by default): configuration files,
logs and ``state.json`` (ports and process ids). Ports are free ones chosen at start.

    .venv/bin/python deploy/cluster/cluster.py up      # `make cluster`: prints the URL
    .venv/bin/python deploy/cluster/cluster.py down    # `make cluster-stop`
    .venv/bin/python deploy/cluster/cluster.py status

Two switches, for what another branch of issue 28 delivers (docs/deploy.md, "The loopback cluster"):

- ``ARBITER_CLUSTER_S3`` (default ``S3_DEFAULT``): ``1`` starts moto's S3 server, creates the bucket
  and gives the nodes ``ARBITER_MEDIA_STORAGE=s3`` and the ``AWS_*`` settings; ``0`` shares
  ``<run dir>/media`` as ``MEDIA_ROOT``.
- ``ARBITER_CLUSTER_HEALTHCHECK`` (default ``HEALTHCHECK_DEFAULT``): what HAProxy checks on each
  node: ``tcp`` (the port accepts), ``livez`` / ``healthz`` or any path (``GET`` answers 200), e.g.
  ``/healthz?checks=database,migrations`` to keep nodes in rotation while the bucket is away.

Other settings: ``ARBITER_CLUSTER_DATABASE`` (default ``arbiter_cluster``, created when missing),
``ARBITER_CLUSTER_REDIS`` (default ``redis://127.0.0.1:6379/7``), ``ARBITER_CLUSTER_WEB_WORKERS``
(gunicorn processes per node, default 2), ``ARBITER_JUDGE_SWEEP_SECONDS`` (how often beat re-queues
judge calls whose worker died; ``SWEEP_DEFAULT`` here).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
PY = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
BIN = Path(PY).parent

# Media in the S3 server; HAProxy checks readiness without the storage check, so nodes stay in
# rotation while the bucket is away (images answer 503 then): docs/deploy.md.
S3_DEFAULT = True
HEALTHCHECK_DEFAULT = "/healthz?checks=database,migrations"

PG_URL = os.environ.get("ARBITER_CLUSTER_POSTGRES", "postgres://postgres@127.0.0.1:5432")
SECRET = "cluster-only-shared-secret-key-not-for-production-0123456789"
BUCKET = "arbiter-cluster-media"
# Beat's lease sweep, in seconds: a call of a SIGKILLed worker node is queued again at most this
# long after its lease ran out, well within a second lease even for a judge with a 2 s timeout
# (lease 9 s). The production default (60 s) suits judges with timeouts of 30 s and more.
SWEEP_DEFAULT = "5"


class ClusterError(RuntimeError):
    """One line saying what did not start (or stop)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ensure_debian_packages(*packages: str) -> None:
    """Install Debian packages that are missing (as the Makefile's chromium target does)."""
    missing = [p for p in packages if shutil.which(p, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise ClusterError(f"{' '.join(missing)} missing: apt-get install -y {' '.join(missing)} (as root)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    if subprocess.run([*apt, "install", "-y", "-qq", *missing], env=env, capture_output=True).returncode != 0:
        subprocess.run([*apt, "update", "-qq"], env=env, capture_output=True)
        done = subprocess.run([*apt, "install", "-y", "-qq", *missing], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterError(f"apt-get install {' '.join(missing)} failed: {done.stderr.strip().splitlines()[-1:]}")
    # Debian starts packaged services; the cluster runs its own instances on free ports.
    for service in missing:
        subprocess.run(["service", service, "stop"], capture_output=True)


def wait_for_port(port: int, what: str, process: subprocess.Popen[bytes] | None = None, timeout: float = 60.0,
                  log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log and log.exists() else []
            raise ClusterError(f"{what} exited with status {process.returncode} at start-up: {' | '.join(tail)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise ClusterError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def http_ok(url: str, timeout: float = 2.0) -> bool:
    import http.client

    parts = urlsplit(url)
    try:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        conn.request("GET", parts.path or "/")
        ok = conn.getresponse().status < 500
        conn.close()
        return ok
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Cluster:
    """The cluster's layout (ports, URLs, pids), saved as ``state.json`` in the run directory."""

    run_dir: Path
    database: str = "arbiter_cluster"
    redis_url: str = "redis://127.0.0.1:6379/7"
    s3: bool = S3_DEFAULT
    healthcheck: str = HEALTHCHECK_DEFAULT
    web_nodes: int = 2
    worker_nodes: int = 2
    web_workers: int = 2
    web_threads: int = 2
    worker_concurrency: int = 2
    settings_module: str = "config.settings.local"
    extra_env: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    # -- layout ---------------------------------------------------------------------------------
    @property
    def lb_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['lb']}"

    def node_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[f'web{i}']}"

    @property
    def direct_url(self) -> str:
        return f"{PG_URL}/{self.database}"

    @property
    def pooled_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.ports['pgbouncer']}/{self.database}"

    @property
    def s3_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    def log(self, name: str) -> Path:
        return self.run_dir / "logs" / f"{name}.log"

    def env(self) -> dict[str, str]:
        """The environment every web and worker node gets (the same on each: docs/deploy.md)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "AWS_", "CELERY_"))}
        env.update(
            DJANGO_SETTINGS_MODULE=self.settings_module, DJANGO_DEBUG="0", DJANGO_SECRET_KEY=SECRET,
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost", DATABASE_URL=self.pooled_url,
            DATABASE_POOLER="pgbouncer", DATABASE_CONN_MAX_AGE="600",
            CELERY_BROKER_URL=self.redis_url, CACHE_URL=self.redis_url, ARBITER_TRUSTED_PROXIES="127.0.0.1",
            STATIC_ROOT=str(self.run_dir / "static"), WEB_CONCURRENCY=str(self.web_workers),
            GUNICORN_THREADS=str(self.web_threads), LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1",
            ARBITER_JUDGE_SWEEP_SECONDS=os.environ.get("ARBITER_JUDGE_SWEEP_SECONDS", SWEEP_DEFAULT),
        )
        if self.s3:
            env.update(
                ARBITER_MEDIA_STORAGE="s3", AWS_STORAGE_BUCKET_NAME=BUCKET, AWS_S3_ENDPOINT_URL=self.s3_url,
                AWS_ACCESS_KEY_ID="cluster", AWS_SECRET_ACCESS_KEY="cluster-secret", AWS_S3_REGION_NAME="us-east-1",
            )
            env.pop("MEDIA_ROOT", None)
        else:
            env["MEDIA_ROOT"] = str(self.run_dir / "media")
        env.update(self.extra_env)
        return env

    def save(self) -> None:
        state = asdict(self)
        state["run_dir"] = str(self.run_dir)
        (self.run_dir / "state.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, run_dir: Path) -> Cluster:
        path = run_dir / "state.json"
        if not path.exists():
            raise ClusterError(f"{path}: no cluster recorded here")
        state = json.loads(path.read_text())
        state["run_dir"] = Path(state["run_dir"])
        return cls(**state)

    # -- processes ------------------------------------------------------------------------------
    def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = self.log(name)
        with log.open("ab") as out:
            process = subprocess.Popen(command, cwd=ROOT, env=env or self.env(), stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids[name] = process.pid
        self.save()
        return process

    def stop(self, name: str, sig: signal.Signals = signal.SIGTERM, timeout: float = 15.0) -> None:
        """Stop one process (its whole process group) and wait for it to be gone."""
        pid = self.pids.pop(name, None)
        self.save()
        if pid is None or not alive(pid):
            return
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:  # not our child (`down` from another process)
                if not alive(pid):
                    break
            time.sleep(0.05)
        else:
            with suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        # The group's other members (gunicorn's and Celery's children) go with it.
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def kill(self, name: str) -> None:
        """SIGKILL a node's whole process group, as a machine losing it would (failure tests)."""
        self.stop(name, signal.SIGKILL, timeout=5.0)

    # -- components -----------------------------------------------------------------------------
    def ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(f"{PG_URL}/postgres", autocommit=True, connect_timeout=5) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [self.database]).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{self.database}"')

    def write_pgbouncer_config(self, pool_mode: str = "transaction") -> Path:
        pg = urlsplit(PG_URL)
        users = self.run_dir / "pgbouncer-users.txt"
        users.write_text('"postgres" ""\n')
        config = self.run_dir / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"{self.database} = host={pg.hostname} port={pg.port or 5432} dbname={self.database}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.ports['pgbouncer']}\nunix_socket_dir =\n"
            f"pool_mode = {pool_mode}\n"
            # The machine's PostgreSQL trusts loopback; a real deployment uses scram-sha-256 here.
            f"auth_type = trust\nauth_file = {users}\nadmin_users = postgres\n"
            # Two nodes x 2 processes x 2 threads + 2 workers x 2 + commands: 20 clients; 500 allowed.
            "max_client_conn = 500\ndefault_pool_size = 20\nreserve_pool_size = 5\n"
            "server_reset_query = DISCARD ALL\nserver_check_query = select 1\nserver_check_delay = 10\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
            "log_connections = 0\nlog_disconnections = 0\n"
        )
        for path in (users, config):
            path.chmod(0o644)
        return config

    def start_pgbouncer(self) -> None:
        config = self.run_dir / "pgbouncer.ini"
        # PgBouncer refuses to run as root; -u switches to PostgreSQL's own user.
        user = ["-u", "postgres"] if os.geteuid() == 0 else []
        process = self._spawn("pgbouncer", ["/usr/sbin/pgbouncer", *user, str(config)])
        wait_for_port(self.ports["pgbouncer"], "PgBouncer", process, log=self.log("pgbouncer"))

    def restart_pgbouncer(self) -> None:
        self.stop("pgbouncer")
        self.start_pgbouncer()

    def write_haproxy_config(self) -> Path:
        path = {"livez": "/livez", "healthz": "/healthz"}.get(self.healthcheck, self.healthcheck)
        if path == "tcp":
            check = ""
        elif path.startswith("/") and " " not in path:
            check = (f"    option httpchk\n    http-check send meth GET uri {path} ver HTTP/1.1 hdr Host localhost\n"
                     "    http-check expect status 200\n")
        else:
            raise ClusterError(f"ARBITER_CLUSTER_HEALTHCHECK: {self.healthcheck!r} is not tcp, livez, healthz or a path")
        servers = "".join(f"    server web{i} 127.0.0.1:{self.ports[f'web{i}']} check\n" for i in range(1, self.web_nodes + 1))
        s3 = (f"frontend s3\n    mode tcp\n    bind 127.0.0.1:{self.ports['s3']}\n    default_backend s3\n"
              f"backend s3\n    mode tcp\n    server moto 127.0.0.1:{self.ports['moto']}\n") if self.s3 else ""
        config = self.run_dir / "haproxy.cfg"
        config.write_text(
            "global\n    maxconn 4000\n"
            f"    stats socket {self.run_dir / 'haproxy.sock'} mode 600 level admin\n"
            "defaults\n    mode http\n    option forwardfor\n    timeout connect 1s\n    timeout client 60s\n"
            "    timeout server 60s\n    timeout http-keep-alive 30s\n    timeout queue 10s\n"
            # A refused connection (a node just killed) is tried again on the other node.
            "    retries 3\n    option redispatch 1\n"
            f"frontend arbiter\n    bind 127.0.0.1:{self.ports['lb']}\n    default_backend nodes\n"
            # Any request may land on any node: no stickiness (the session lives in PostgreSQL).
            "backend nodes\n    balance roundrobin\n"
            # A check may take a while on a loaded node (/healthz reads the database): 3 s before it
            # counts as failed. A killed node is not waited for: its refused connections are redispatched.
            f"{check}    timeout check 3s\n    default-server inter 2s fastinter 1s downinter 1s fall 3 rise 2\n{servers}{s3}"
        )
        return config

    def start_haproxy(self) -> None:
        process = self._spawn("haproxy", ["/usr/sbin/haproxy", "-db", "-f", str(self.run_dir / "haproxy.cfg")])
        wait_for_port(self.ports["lb"], "HAProxy", process, log=self.log("haproxy"))

    def start_s3(self) -> None:
        """moto's S3 server; the nodes reach it through HAProxy (``s3_url``), so it can be cut off."""
        process = self._spawn("s3", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.ports["moto"])])
        wait_for_port(self.ports["moto"], "moto's S3 server", process, log=self.log("s3"))
        import boto3

        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.ports['moto']}", aws_access_key_id="cluster",
                              aws_secret_access_key="cluster-secret", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)

    def haproxy_command(self, command: str) -> str:
        """One command on HAProxy's admin socket (``disable server s3/moto``, ``show stat``)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.run_dir / "haproxy.sock"))
            s.sendall(command.encode() + b"\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def s3_reachable(self, reachable: bool) -> None:
        """Cut the nodes off from the S3 server (refused at once), or let them reach it again."""
        if reachable:
            self.haproxy_command("enable server s3/moto")
        else:
            self.haproxy_command("disable server s3/moto")
            self.haproxy_command("shutdown sessions server s3/moto")

    def s3_stalled(self, stalled: bool) -> None:
        """Stall the S3 server (SIGSTOP: connections are still accepted, nothing is answered), or
        let it go on (SIGCONT): a bucket that hangs, rather than refuses."""
        os.kill(self.pids["s3"], signal.SIGSTOP if stalled else signal.SIGCONT)

    def start_web(self, i: int, **overrides: str) -> None:
        """Web node ``i`` (its port chosen now if it has none: a node outside the load balancer)."""
        name = f"web{i}"
        if name not in self.ports:
            self.ports[name] = free_port()
        env = {**self.env(), **overrides}
        process = self._spawn(name, [str(BIN / "gunicorn"), "-c", str(ROOT / "gunicorn.conf.py"),
                                     "-b", f"127.0.0.1:{self.ports[name]}", "--log-level", "warning"], env=env)
        wait_for_port(self.ports[name], f"web node {i}", process, log=self.log(name), timeout=90)

    def start_worker(self, i: int) -> None:
        name = f"worker{i}"
        self._spawn(name, [PY, "-m", "celery", "-A", "config", "worker", "-n", f"node{i}@%h", "--pool=prefork",
                           f"--concurrency={self.worker_concurrency}", "--without-gossip", "--without-mingle",
                           "--without-heartbeat", "-Q", "celery", "--loglevel=WARNING"])

    def start_beat(self) -> None:
        """Exactly one ``celery beat`` for the cluster (docs/deploy.md): it queues ``judges.sweep_leases``,
        which re-queues the calls of a worker node that died, with no operator command."""
        if self.pids.get("beat") and alive(self.pids["beat"]):
            raise ClusterError("celery beat is already running: a second one would queue every periodic task twice")
        self._spawn("beat", [PY, "-m", "celery", "-A", "config", "beat", "--loglevel=WARNING",
                             "--schedule", str(self.run_dir / "celerybeat-schedule")])

    def manage(self, *args: str, direct: bool = True) -> None:
        env = self.env()
        if direct:  # migrations and other DDL go straight to PostgreSQL (docs/deploy.md, "PgBouncer")
            env.update(DATABASE_URL=self.direct_url, DATABASE_POOLER="")
        done = subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["(no output)"]
            raise ClusterError(f"manage.py {' '.join(args)}: {last[0]}")

    def wait_workers(self, timeout: float = 60.0) -> None:
        """Until every worker node answers a ping on the broker."""
        from celery import Celery

        app = Celery(broker=self.redis_url)
        deadline = time.monotonic() + timeout
        want = {f"node{i}" for i in range(1, self.worker_nodes + 1)}
        while time.monotonic() < deadline:
            replies = app.control.ping(timeout=1.0) or []
            names = {name.split("@")[0] for reply in replies for name in reply}
            if want <= names:
                return
        raise ClusterError(f"worker nodes {sorted(want)} did not answer a ping within {timeout:.0f} s")

    def wait_serving(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        for url in [self.node_url(i) for i in range(1, self.web_nodes + 1)] + [self.lb_url]:
            while not http_ok(f"{url}/accounts/login/"):
                if time.monotonic() > deadline:
                    raise ClusterError(f"{url} did not answer within {timeout:.0f} s (logs in {self.run_dir / 'logs'})")
                time.sleep(0.2)

    def up(self, *, migrate: bool = True, collectstatic: bool = False) -> None:
        ensure_debian_packages("pgbouncer", "haproxy")
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        for path in (self.run_dir, self.run_dir / "logs"):
            path.chmod(0o755)
        (self.run_dir / "media").mkdir(exist_ok=True)
        names = ["lb", "pgbouncer"] + [f"web{i}" for i in range(1, self.web_nodes + 1)] + (["s3", "moto"] if self.s3 else [])
        self.ports = {name: free_port() for name in names}
        self.save()
        try:
            self.ensure_database()
            self.write_pgbouncer_config()
            self.start_pgbouncer()
            self.write_haproxy_config()
            self.start_haproxy()
            if self.s3:
                self.start_s3()
            if migrate:
                self.manage("migrate", "--noinput", "-v", "0")
            if collectstatic:
                self.manage("collectstatic", "--noinput", "-v", "0")
            for i in range(1, self.web_nodes + 1):
                self.start_web(i)
            for i in range(1, self.worker_nodes + 1):
                self.start_worker(i)
            self.start_beat()
            self.wait_serving()
            self.wait_workers()
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        # The load balancer first (no new requests), then nodes, then what they depend on.
        order = ["haproxy", *sorted(n for n in self.pids if n.startswith("web")), *sorted(n for n in self.pids if n.startswith("worker")), "beat", "s3", "pgbouncer"]
        for name in order + [n for n in list(self.pids) if n not in order]:
            self.stop(name)

    def running(self) -> dict[str, bool]:
        return {name: alive(pid) for name, pid in self.pids.items()}


@contextmanager
def cluster(run_dir: Path, **options: object) -> Iterator[Cluster]:
    """A cluster for the length of the block (failure tests, bench_cluster.py)."""
    c = Cluster(run_dir=run_dir, **options)  # type: ignore[arg-type]
    c.up()
    try:
        yield c
    finally:
        c.down()


def from_environment(run_dir: Path) -> Cluster:
    s3 = os.environ.get("ARBITER_CLUSTER_S3", "1" if S3_DEFAULT else "0")
    if s3 not in ("0", "1"):
        raise ClusterError(f"ARBITER_CLUSTER_S3: {s3!r} is not 0 or 1")
    workers = os.environ.get("ARBITER_CLUSTER_WEB_WORKERS", "2")
    if not workers.isdigit() or int(workers) < 1:
        raise ClusterError(f"ARBITER_CLUSTER_WEB_WORKERS: {workers!r} is not a positive number")
    return Cluster(
        run_dir=run_dir, database=os.environ.get("ARBITER_CLUSTER_DATABASE", "arbiter_cluster"),
        redis_url=os.environ.get("ARBITER_CLUSTER_REDIS", "redis://127.0.0.1:6379/7"), s3=s3 == "1",
        healthcheck=os.environ.get("ARBITER_CLUSTER_HEALTHCHECK", HEALTHCHECK_DEFAULT), web_workers=int(workers),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("up", "down", "status"))
    parser.add_argument("--run-dir", type=Path, default=ROOT / "var" / "cluster")
    args = parser.parse_args()
    run_dir = args.run_dir.resolve()
    try:
        if args.command == "up":
            if (run_dir / "state.json").exists() and any(Cluster.load(run_dir).running().values()):
                raise ClusterError(f"a cluster is already running under {run_dir} (make cluster-stop)")
            c = from_environment(run_dir)
            c.up(collectstatic=True)
            media = f"S3 bucket {BUCKET} on {c.s3_url}" if c.s3 else f"shared directory {run_dir / 'media'}"
            print(f"Arbiter cluster on {c.lb_url}/  (HAProxy, {c.healthcheck} checks -> web nodes "
                  f"{', '.join(c.node_url(i) for i in range(1, c.web_nodes + 1))}; PgBouncer :{c.ports['pgbouncer']} "
                  f"-> {c.direct_url}; broker {c.redis_url}; {c.worker_nodes} worker nodes and one beat; media: {media}; "
                  f"logs {run_dir / 'logs'})")
            print(f"stop with: make cluster-stop   (environment of the nodes: {run_dir / 'state.json'})")
        elif args.command == "down":
            if not (run_dir / "state.json").exists():
                print(f"no cluster under {run_dir}")
                return
            Cluster.load(run_dir).down()
            print(f"cluster under {run_dir} stopped")
        else:
            c = Cluster.load(run_dir)
            print(json.dumps({"url": c.lb_url, "ports": c.ports, "running": c.running()}, indent=2))
    except ClusterError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
