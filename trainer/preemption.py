"""Spot / preemptible instances: the cloud's interruption notice makes the trainer pause at once.

A VM provider that makes spot instances sets FOUNDRY_PREEMPTION_NOTICE=aws (or gce) in the job's
environment; a thread then polls the instance metadata service every FOUNDRY_PREEMPTION_POLL_S
(default 5 s; AWS gives two minutes' notice, GCE thirty seconds) and, on a notice, raises the same
pause request a SIGTERM raises: the loop checkpoints after this step and exits "paused". The
provider, which saw no stop of its own, reports the resumption lost (preempted): retry-eligible.

The endpoints are the SDKs' own settings, so a test points them at a loopback server:
  aws: AWS_EC2_METADATA_SERVICE_ENDPOINT (default http://169.254.169.254/), IMDSv2 token, then
       GET latest/meta-data/spot/instance-action (404: no notice; 200: {"action": "terminate", ...})
  gce: GCE_METADATA_HOST (default metadata.google.internal),
       GET computeMetadata/v1/instance/preempted (Metadata-Flavor: Google) -> "TRUE" once preempted
"""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.error
import urllib.request

NOTICE_ENV = "FOUNDRY_PREEMPTION_NOTICE"


def aws_notice(timeout: float = 2.0) -> str | None:
    base = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254/").rstrip("/")
    token_req = urllib.request.Request(f"{base}/latest/api/token", method="PUT",
                                       headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"})
    with urllib.request.urlopen(token_req, timeout=timeout) as reply:
        token = reply.read().decode()
    req = urllib.request.Request(f"{base}/latest/meta-data/spot/instance-action",
                                 headers={"X-aws-ec2-metadata-token": token})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as reply:
            return f"AWS spot interruption notice: {reply.read().decode()[:200]}"
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def gce_notice(timeout: float = 2.0) -> str | None:
    host = os.environ.get("GCE_METADATA_HOST", "metadata.google.internal")
    req = urllib.request.Request(f"http://{host}/computeMetadata/v1/instance/preempted",
                                 headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(req, timeout=timeout) as reply:
        return "GCE preemption notice" if reply.read().decode().strip().upper() == "TRUE" else None


CHECKS = {"aws": aws_notice, "gce": gce_notice}


class PreemptionWatch:
    """Polls the notice in a daemon thread and sets the trainer's PauseRequest when it comes."""

    def __init__(self, pause, cloud: str, poll_s: float):
        self.pause, self.check, self.poll_s = pause, CHECKS[cloud], poll_s
        self.notice: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="foundry-preemption", daemon=True)

    def start(self) -> "PreemptionWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set() and not self.pause.requested:
            try:
                self.notice = self.check()
            except OSError:   # the metadata service is unreachable for a moment: ask again
                self.notice = None
            if self.notice:
                self.pause.requested = True   # read by the loop's all-reduce, like a SIGTERM's
                self.pause.at = time.monotonic()
                sys.stderr.write(f"foundry: {self.notice}: pausing after this step (checkpoint, then exit)\n")
                sys.stderr.flush()
                return
            self._stop.wait(self.poll_s)


def watch_preemption(pause) -> PreemptionWatch | None:
    """Start watching when the job runs on an instance its provider made preemptible."""
    cloud = os.environ.get(NOTICE_ENV, "").strip().lower()
    if cloud not in CHECKS:
        return None
    return PreemptionWatch(pause, cloud, float(os.environ.get("FOUNDRY_PREEMPTION_POLL_S", "5"))).start()
