"""Spot interruption notices from a loopback instance-metadata server (AWS IMDSv2
spot/instance-action, GCE instance/preempted): the trainer pauses after the step it sees the notice
in, with a published checkpoint, as a SIGTERM would make it."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from toy_job import ToyLoader, ToyModel  # noqa: E402


class Metadata(BaseHTTPRequestHandler):
    notice = False
    token = "tok-123"

    def do_PUT(self):   # IMDSv2: a session token first
        ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        self._reply(200 if ok else 400, self.token)

    def do_GET(self):
        if self.path == "/latest/meta-data/spot/instance-action":
            if self.headers.get("X-aws-ec2-metadata-token") != self.token:
                return self._reply(401, "")
            return self._reply(200, json.dumps({"action": "terminate", "time": "2026-11-28T14:00:00Z"})) \
                if Metadata.notice else self._reply(404, "")
        if self.path == "/computeMetadata/v1/instance/preempted" and self.headers.get("Metadata-Flavor") == "Google":
            return self._reply(200, "TRUE" if Metadata.notice else "FALSE")
        self._reply(404, "")

    def _reply(self, code: int, body: str):
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def metadata():
    Metadata.notice = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class NoticeAt:
    """The cloud posts its notice after batch `step`; the step waits until the watcher has seen it,
    so the pause lands at a known step."""

    def __init__(self, step: int):
        self.step = step

    def batch_end(self, trainer) -> None:
        if trainer.timestamp.batch == self.step:
            Metadata.notice = True
            deadline = time.monotonic() + 30
            while not trainer.pause.requested and time.monotonic() < deadline:
                time.sleep(0.01)


def _train(tmp_path, callbacks):
    from foundry.trainer import Trainer

    torch.manual_seed(0)
    model = ToyModel()
    trainer = Trainer(run_name="spot", model=model, train_dataloader=ToyLoader(0, 1), max_duration="8ba",
                      optimizers=torch.optim.AdamW(model.parameters(), lr=1e-2), save_folder=str(tmp_path / "ckpt"),
                      save_interval="1000ba", run_dir=str(tmp_path / "run"), callbacks=callbacks, progress_bar=False,
                      device="cpu", exit_on_pause=False)
    return trainer.fit()


@pytest.mark.parametrize("cloud", ["aws", "gce"])
def test_an_interruption_notice_pauses_with_a_checkpoint(tmp_path, monkeypatch, metadata, capsys, cloud):
    monkeypatch.setenv("FOUNDRY_PREEMPTION_NOTICE", cloud)
    monkeypatch.setenv("FOUNDRY_PREEMPTION_POLL_S", "0.02")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://{metadata}/")
    monkeypatch.setenv("GCE_METADATA_HOST", metadata)
    trainer = _train(tmp_path, [NoticeAt(3)])
    assert trainer.paused and trainer.timestamp.batch == 4     # the step after the notice
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    [paused] = [r for r in rows if r.get("event") == "paused"]
    assert paused["checkpoint"] == "ep0-ba4"
    assert "notice" in capsys.readouterr().err


def test_without_the_setting_no_metadata_is_asked(tmp_path, monkeypatch, metadata):
    monkeypatch.delenv("FOUNDRY_PREEMPTION_NOTICE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://{metadata}/")
    Metadata.notice = True                                     # a notice nobody watches for
    trainer = _train(tmp_path, [])
    assert not trainer.paused and trainer.timestamp.batch == 8
