"""Requests per store and billing class (PUT/LIST vs GET), counted by the storage layer in the same
per-process record as the egress bytes, priced per resumption from FOUNDRY_HOME/prices.yaml and
shown by describe run (text and --json)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from foundry.app.control import request_cost, run_cost
from foundry.plugins.errors import ConfigError
from foundry.plugins.manager import open_store
from foundry.plugins.transfers import METER


def test_each_store_call_counts_one_request_of_its_class(tmp_path, monkeypatch):
    (tmp_path / "s").mkdir()
    monkeypatch.setenv("FOUNDRY_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("RESUMPTION_INDEX", "1")
    METER.reset()
    store = open_store(f"file://{tmp_path}/s", purpose="checkpoint")
    store.put("a", b"12345")
    store.put_file("b", __file__)
    list(store.list(""))
    store.get("a")
    store.get_range("a", 0, 2)
    store.exists("a")
    METER.flush()
    counts = METER.snapshot()["file://"]["checkpoint"]
    assert (counts["put_list"], counts["get"]) == (3, 3)
    [record] = (tmp_path / "run" / "egress" / "r1").glob("*.json")
    assert json.loads(record.read_text())["stores"]["file://"]["checkpoint"]["put_list"] == 3   # structured record
    METER.reset()


def _record(run_dir, resumption: int, node: str, stores: dict) -> None:
    folder = run_dir / "egress" / f"r{resumption}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{node}-1.json").write_text(json.dumps({"resumption": resumption, "node": node, "stores": stores}))


def test_requests_are_priced_per_resumption_from_the_editable_table(tmp_path):
    run_dir = tmp_path / "run"
    _record(run_dir, 0, "n1", {"s3://data": {"data": {"read": 10, "written": 0, "get": 4000}},
                               "s3://ckpt": {"checkpoint": {"read": 0, "written": 5, "put_list": 2000, "get": 10}}})
    _record(run_dir, 0, "n2", {"s3://data": {"data": {"read": 10, "written": 0, "get": 1000}}})
    _record(run_dir, 1, "n1", {"s3://data": {"data": {"read": 1, "written": 0}}})   # an older record: bytes only
    (tmp_path / "prices.yaml").write_text("request_stores: {s3://ckpt: {put_list: 0.0045, get: 0.00036}}\n")
    summary = request_cost.summarize(run_dir, request_cost.load_prices(tmp_path))
    assert summary["0"]["stores"]["s3://data"] == {"put_list": 0, "get": 5000, "usd": 0.002}   # S3 list price
    assert summary["0"]["stores"]["s3://ckpt"]["usd"] == pytest.approx(2 * 0.0045 + 0.01 * 0.00036, abs=1e-6)   # R2 prices
    assert summary["1"]["stores"]["s3://data"] == {"put_list": 0, "get": 0, "usd": 0.0}

    run = SimpleNamespace(resumptions=[SimpleNamespace(index=i, started_at=0.0, ended_at=3600.0, cluster="c", devices=1)
                                       for i in (0, 1)])
    cost = run_cost.run_cost(run, {}, {"c": 1.0}, {"cost": {"usd": 0.5}}, requests=summary)
    assert cost["resumptions"]["0"]["requests"] == summary["0"]
    assert cost["requests_usd"] == pytest.approx(summary["0"]["usd"], abs=1e-6)
    assert cost["total_usd"] == pytest.approx(2.0 + 0.5 + summary["0"]["usd"], abs=1e-6)
    assert "requests $0.01" in run_cost.cost_line(cost)
    assert "s3://data 0 PUT/LIST + 5000 GET" in request_cost.request_line("0", summary["0"])


def test_a_malformed_request_price_table_is_one_clear_error(tmp_path):
    (tmp_path / "prices.yaml").write_text("request_usd_per_1000: {s3: 0.005}\n")
    with pytest.raises(ConfigError, match="put_list"):
        request_cost.load_prices(tmp_path)
