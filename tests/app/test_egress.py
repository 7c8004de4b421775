"""Egress accounting without a cluster: the storage layer counts exact payload bytes per store and
purpose, each job process keeps one record, the control plane sums them per node and prices them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from foundry.app.control import egress
from foundry.plugins.errors import ConfigError
from foundry.plugins.manager import open_store
from foundry.plugins.transfers import METER, purpose_of


def test_open_store_counts_exact_bytes_and_keeps_the_backend_type(tmp_path):
    (tmp_path / "src").mkdir()
    blob = os.urandom(70_001)
    (tmp_path / "local.bin").write_bytes(blob)
    before = METER.snapshot().get("file://", {}).get("upload", {"read": 0, "written": 0})
    store = open_store(f"file://{tmp_path}/src", purpose="upload")
    from foundry.backends.storage.file import FileStore

    assert isinstance(store, FileStore) and store.url == f"file://{tmp_path}/src"
    store.put_file("a.bin", tmp_path / "local.bin")
    store.put("b.bin", b"x" * 10)
    assert store.get_range("a.bin", 5, 105) == blob[5:105]
    store.get_file("a.bin", tmp_path / "copy.bin")
    after = METER.snapshot()["file://"]["upload"]
    assert after["written"] - before["written"] == 70_011
    assert after["read"] - before["read"] == 100 + 70_001


def test_the_calling_module_says_what_the_bytes_are_for():
    assert purpose_of("foundry.streaming.cache.shards") == "data"
    assert purpose_of("foundry.trainer.checkpoint.session") == "checkpoint"
    assert purpose_of("foundry.streaming.writer") == "upload"
    assert purpose_of("foundry.app.cli.storage_cmds") == "other"


JOB = """
import os, sys
from foundry.plugins.manager import open_store
store = open_store(sys.argv[1], purpose="data")
store.get("a")
if os.fork() == 0:          # a DataLoader worker: starts from zero, writes its own record
    store.get("a"); store.get("a")
    sys.exit(0)
os.wait()
store.put("b", b"12345")
"""


@pytest.mark.subprocess
def test_a_job_keeps_one_record_per_process_and_describe_sums_them(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "a").write_bytes(b"z" * 1000)
    run_dir = tmp_path / "run"
    env = {**os.environ, "FOUNDRY_RUN_DIR": str(run_dir), "RESUMPTION_INDEX": "2", "RANK": "0"}
    subprocess.run([sys.executable, "-c", JOB, f"file://{tmp_path}/s"], env=env, check=True, timeout=60)
    records = egress.read_records(run_dir)
    assert sorted(r["stores"]["file://"]["data"]["read"] for r in records) == [1000, 2000]
    (run_dir / "egress" / "r2" / "broken.json").write_text("{not json")      # skipped, never fatal
    summary = egress.summarize(run_dir, egress.load_prices(tmp_path))
    (node,) = summary["resumptions"]["2"]
    usage = summary["resumptions"]["2"][node]
    assert usage["data"] == {"read": 3000, "written": 5} and usage["checkpoint"] == {"read": 0, "written": 0}
    assert summary["total"]["stores"]["file://"]["data"]["read"] == 3000
    assert summary["cost"]["usd"] == 0.0


def test_price_table_is_editable_and_checked(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "egress" / "r0").mkdir(parents=True)
    record = {"resumption": 0, "node": "n1", "stores": {
        "s3://aws-bucket": {"data": {"read": 2 * 10**9, "written": 0}},
        "r2://r2-bucket": {"data": {"read": 5 * 10**9, "written": 0}},
        "s3://r2-behind-s3": {"checkpoint": {"read": 10**9, "written": 3 * 10**9}}}}
    (run_dir / "egress" / "r0" / "n1-1.json").write_text(json.dumps(record))
    summary = egress.summarize(run_dir, egress.load_prices(tmp_path))
    assert summary["cost"]["usd"] == pytest.approx(2 * 0.09 + 1 * 0.09)    # R2: zero egress
    (tmp_path / "prices.yaml").write_text("egress_usd_per_gb: {s3: 0.05}\nstores: {s3://r2-behind-s3: 0}\n")
    summary = egress.summarize(run_dir, egress.load_prices(tmp_path))
    assert summary["cost"]["usd"] == pytest.approx(2 * 0.05)
    assert "n1" in egress.rows(summary)[0]["node"] and "$0.1000" in egress.cost_line(summary)
    (tmp_path / "prices.yaml").write_text("egress_usd_per_gb: [1, 2]\n")
    with pytest.raises(ConfigError, match="price table"):
        egress.load_prices(tmp_path)
