"""Cost per run: each resumption's compute (an ec2 handle's catalogue price, or the cluster's price
per device-hour from prices.yaml, default 0) plus the measured transfers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from foundry.app.control.models import Resumption
from foundry.app.control.run_cost import cluster_prices, cost_line, run_cost
from foundry.plugins.errors import ConfigError


def _res(index, cluster, devices, started, ended):
    return Resumption(index=index, cluster=cluster, provider="x", nodes=1, devices=devices, state="paused",
                      started_at=started, ended_at=ended)


def test_a_moved_run_costs_its_instance_hours_its_fleet_hours_and_its_transfers(tmp_path):
    (tmp_path / "prices.yaml").write_text("compute_usd_per_gpu_hour: {fleet: 1.5}\n")
    run = SimpleNamespace(resumptions=[_res(0, "local", 2, 0, 3600), _res(1, "fleet", 4, 3600, 5400),
                                       _res(2, "aws", 1, 5400, 12600)])
    ec2 = {"data": {"price_per_hour": 2.0, "instances": 2, "instance_type": "g5.xlarge", "spot": True}}
    cost = run_cost(run, {2: ec2}, cluster_prices(tmp_path), {"cost": {"usd": 0.25}})
    assert [cost["resumptions"][i]["usd"] for i in "012"] == [0.0, 3.0, 4.0]   # local free; 4 x 1.5 x 0.5 h; 2 h x $2
    assert "2 x g5.xlarge spot" in cost["resumptions"]["2"]["basis"]
    assert cost["compute_usd"] == 7.0 and cost["total_usd"] == 7.25
    assert cost_line(cost) == "estimated cost $7.2500: compute $7.0000 + transfers $0.2500 + requests $0.0000"


def test_a_running_resumption_costs_until_now():
    run = SimpleNamespace(resumptions=[_res(0, "aws", 1, 0, None)])
    cost = run_cost(run, {0: {"data": {"price_per_hour": 1.0}}}, {}, {}, now=1800)
    assert cost["resumptions"]["0"]["hours"] == 0.5 and cost["total_usd"] == 0.5


def test_a_bad_price_table_says_how_to_write_it(tmp_path):
    (tmp_path / "prices.yaml").write_text("compute_usd_per_gpu_hour: {fleet: cheap}\n")
    with pytest.raises(ConfigError, match="compute_usd_per_gpu_hour"):
        cluster_prices(tmp_path)


@pytest.mark.subprocess
def test_describe_and_get_runs_show_the_cost(cli, cp, tmp_path, pausable):
    import json

    from support.control import wait_for

    spec = tmp_path / "run.yaml"
    spec.write_text(json.dumps({"name": "priced", "command": pausable, "compute": {"gpus": 2}}))
    (cp.paths.home / "prices.yaml").write_text("compute_usd_per_gpu_hour: {local: 3600.0}\n")   # $1 per device-second
    assert cli("run", "-f", str(spec))[0] == 0
    wait_for(lambda: len(list(cp.paths.run_dir("priced").glob("started-0-*"))) == 2)
    assert cli("stop", "priced", "--wait")[0] == 0
    described = json.loads(cli("--json", "describe", "run", "priced")[1])
    [res] = described["resumptions"]
    assert res["cost"]["usd_per_hour"] == 7200.0 and res["cost"]["usd"] > 0
    assert described["cost"]["total_usd"] == pytest.approx(res["cost"]["usd"] + described["cost"]["transfer_usd"])
    assert "COST" in cli("get", "runs")[1] and "estimated cost $" in cli("describe", "run", "priced")[1]
