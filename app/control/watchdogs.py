"""Which watchdogs (`foundry watch`) run for this FOUNDRY_HOME, and the one started with --daemon.

Each `foundry watch` keeps a record, `watchdogs/<host>-<pid>.json` under the home, rewritten after
every pass (`last_pass`) and removed when it exits. A record counts as a running watchdog while its
last pass is recent (within STALE_PASSES intervals plus a margin: a pass that waits on a slow
provider is not a dead watchdog) and, on this host, while its process exists. Records a killed
watchdog left behind on this host are removed by the next reader; another host's are only ignored.

Several watchdogs may run: launching is one compare-and-set in the registry, so they never launch a
run twice. `--daemon` refuses to start a second daemon on the same host, since it would only double
the provider calls.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from foundry.plugins.errors import ConfigError, FoundryError

FOLDER = "watchdogs"
STALE_PASSES = 3
MARGIN_S = 60.0
DAEMON_LOG = "daemon.log"


@dataclass
class WatchdogInfo:
    pid: int
    host: str
    started_at: float
    last_pass: float | None
    interval: float
    daemon: bool

    def to_dict(self) -> dict:
        return asdict(self)


def _folder(home: Path) -> Path:
    return Path(home) / FOLDER


def _write(path: Path, info: WatchdogInfo) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info.to_dict()))
    os.replace(tmp, path)  # a reader never sees half a record


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    try:  # a zombie (exited, its parent has not waited yet) is not a running watchdog
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@contextmanager
def registered(home: Path, interval: float, daemon: bool = False) -> Iterator[Callable[[], None]]:
    """Record this process as a watchdog while the block runs; yields `passed()`, called after each pass."""
    folder = _folder(home)
    folder.mkdir(parents=True, exist_ok=True)
    info = WatchdogInfo(os.getpid(), socket.gethostname(), time.time(), None, interval, daemon)
    path = folder / f"{info.host}-{info.pid}.json"
    _write(path, info)

    def passed() -> None:
        info.last_pass = time.time()
        _write(path, info)

    try:
        yield passed
    finally:
        path.unlink(missing_ok=True)


def running(home: Path, now: float | None = None) -> list[WatchdogInfo]:
    """The watchdogs that run now (oldest first)."""
    now = time.time() if now is None else now
    host, out = socket.gethostname(), []
    for path in sorted(_folder(home).glob("*.json")):
        try:
            info = WatchdogInfo(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue  # being replaced, or not ours
        if info.host == host and not _alive(info.pid):
            path.unlink(missing_ok=True)  # killed without its cleanup (SIGKILL, a crash)
            continue
        seen = info.last_pass if info.last_pass is not None else info.started_at
        if now - seen <= STALE_PASSES * info.interval + MARGIN_S:
            out.append(info)
    return sorted(out, key=lambda i: i.started_at)


def start_daemon(home: Path, interval: float, timeout: float = 30.0) -> WatchdogInfo:
    """`foundry watch` in its own session, output in watchdogs/daemon.log; returns once it has registered."""
    host = socket.gethostname()
    mine = [w for w in running(home) if w.daemon and w.host == host]
    if mine:
        raise ConfigError(f"a watchdog daemon already runs on {host} (pid {mine[0].pid})",
                          hint="`foundry watch --stop` stops it")
    folder = _folder(home)
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "FOUNDRY_HOME": str(home)}
    with open(folder / DAEMON_LOG, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "foundry.app.cli.main", "watch", "--interval", f"{interval:g}",
                                 "--daemon-child"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [w for w in running(home) if w.pid == proc.pid]
        if found:
            return found[0]
        if proc.poll() is not None:
            raise FoundryError(f"the watchdog daemon exited at once (exit {proc.returncode})",
                               hint=f"see {folder / DAEMON_LOG}")
        time.sleep(0.1)
    raise FoundryError(f"the watchdog daemon (pid {proc.pid}) did not register within {timeout:.0f}s",
                       hint=f"see {folder / DAEMON_LOG}")


def stop_daemons(home: Path, timeout: float = 30.0) -> list[int]:
    """SIGTERM this host's watchdog daemons; the pids stopped, once they have exited."""
    import signal

    host = socket.gethostname()
    pids = [w.pid for w in running(home) if w.daemon and w.host == host]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids
