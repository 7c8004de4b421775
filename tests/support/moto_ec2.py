"""moto's server mode as a loopback EC2 API for the cloud-VM provider tests (`pip install 'moto[server]'`).

- `moto_server` (module): one `moto_server` process on a free loopback port, stopped at the end of
  the module. Attributes: `endpoint`, `client(region)` (a plain boto3 EC2 client), `reset()`.
- `ec2_api` (function): the server, reset, with this test's environment pointed at it the way a user
  points botocore at any EC2 endpoint (AWS_ENDPOINT_URL_EC2) and dummy keys (the usual chain).
  Subprocesses (`foundry` as a process) inherit it. Skipped when moto is not installed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.storage_servers import free_ports

REGION = "us-east-1"


@dataclass
class MotoServer:
    endpoint: str
    proc: subprocess.Popen

    def client(self, region: str = REGION):
        import boto3

        return boto3.client("ec2", region_name=region, endpoint_url=self.endpoint,
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"), timeout=10)

    def live_instances(self, region: str = REGION) -> list[dict]:
        reply = self.client(region).describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])
        return [i for r in reply["Reservations"] for i in r["Instances"]]

    def image(self, region: str = REGION) -> str:
        return self.client(region).describe_images(Owners=["amazon"])["Images"][0]["ImageId"]


@pytest.fixture(scope="module", name="moto_server")
def moto_server_fixture(tmp_path_factory):
    binary = Path(sys.executable).parent / "moto_server"
    if not binary.exists():
        pytest.skip("moto[server] is not installed (pip install -e '.[test]')")
    port = free_ports(1)[0]
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
    server = MotoServer(f"http://127.0.0.1:{port}", proc)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{server.endpoint}/moto-api/", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
    yield server
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(name="ec2_api")
def ec2_api_fixture(moto_server, monkeypatch):
    moto_server.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", moto_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    return moto_server
