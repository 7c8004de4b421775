"""The pod entrypoint from the generated Job manifest, run as a REAL local process (bash + torchrun
+ 2 gloo ranks), with the rendezvous host replaced by loopback: SIGTERM to it (what the kubelet
sends to PID 1 when the Job is suspended) pauses each worker once and the container exits 75."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundry.backends.compute.kubernetes.config import KubernetesConfig
from foundry.backends.compute.kubernetes.manifests import build_manifests

pytestmark = pytest.mark.integration
WORKER = str(Path(__file__).with_name("slurm_worker.py"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _container_command(mode: str, port: int, tmp_path) -> list[str]:
    from foundry.plugins.compute import JobRequest

    request = JobRequest("k", "rid", 0, [sys.executable, WORKER, mode], nodes=1, procs_per_node=2, image="img")
    job = build_manifests(request, KubernetesConfig(python=sys.executable, rdzv_port=port), "pod")[-1]
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    script = command[2].replace(f"pod-0.pod:{port}", f"127.0.0.1:{port}").replace("/tmp/foundry", str(tmp_path / "pod"))
    return [command[0], command[1], script, *command[3:]]


def _run(argv, env_extra=None):
    import tempfile

    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={"PATH": "/usr/bin:/bin", "RUN_NAME": "k", "RUN_ID": "rid", "RESUMPTION_INDEX": "0",
                                 "TMPDIR": tempfile.gettempdir()})  # the test's own, as a pod has its own /tmp


def test_entrypoint_runs_torchrun_and_exits_with_the_workers_code(tmp_path):
    proc = _run(_container_command("allreduce", _free_port(), tmp_path))
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    assert out.count("allreduce=3") == 2


def test_sigterm_to_the_entrypoint_pauses_each_worker_once_and_exits_75(tmp_path):
    proc = _run(_container_command("pause", _free_port(), tmp_path))
    logs = tmp_path / "pod" / "logs"
    deadline = time.monotonic() + 60
    while sum("ready rank=" in p.read_text() for p in logs.glob("rank-*.log")) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stdout.read()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 75, out
    assert "paused rank=0 sigterms=1" in out and "paused rank=1 sigterms=1" in out
