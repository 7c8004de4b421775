"""ec2 cluster options and the catalogue, without any server (fast tier)."""

from __future__ import annotations

import json

import pytest

from foundry.backends.compute.ec2 import catalogue
from foundry.backends.compute.ec2.config import Ec2Config
from foundry.plugins.errors import ConfigError


def test_gpus_pick_the_cheapest_catalogue_type_and_an_edit_changes_it(tmp_path, monkeypatch):
    cfg = Ec2Config.from_dict({"region": "us-east-1", "gpus": 1, "gpu_type": "a10g"})
    assert cfg.instance_type == "g5.xlarge" and cfg.gpus == 1
    edits = tmp_path / "foundry-home" / "catalogue"
    edits.mkdir(parents=True, exist_ok=True)
    (edits / "ec2.json").write_text(json.dumps({"g5.xlarge": {"price": 0.5, "spot_price": 0.2}}))
    monkeypatch.setenv("FOUNDRY_HOME", str(tmp_path / "foundry-home"))
    assert catalogue.hourly_price("g5.xlarge", spot=True) == 0.2
    assert catalogue.hourly_price("g5.xlarge", spot=False) == 0.5


@pytest.mark.parametrize("options, says", [
    ({"instance_type": "t3.micro"}, "needs a region"),
    ({"region": "us-east-1"}, "needs an instance type"),
    ({"region": "us-east-1", "gpus": 3}, "no instance type in the catalogue"),
    ({"region": "us-east-1", "instance_type": "t3.micro", "spot": "maybe"}, "spot must be true or false"),
    ({"region": "us-east-1", "instance_type": "t3.micro", "zone_id": "x"}, "unknown option"),
])
def test_bad_options_are_refused_in_one_line(options, says):
    with pytest.raises(ConfigError, match=says):
        Ec2Config.from_dict(options)


def test_create_cluster_refuses_a_bad_option_with_exit_2(cli):
    code, out, err = cli("create", "cluster", "aws", "--provider", "ec2", "-o", "instance_type=t3.micro")
    assert code == 2 and "needs a region" in out + err


def test_the_logs_of_a_job_whose_instances_were_terminated_say_so_at_once(tmp_path):
    from foundry.backends.compute.ec2.provider import Ec2Provider
    from foundry.plugins.compute import JobHandle

    p = Ec2Provider({"name": "aws", "region": "us-east-1", "instance_type": "t3.micro",
                     "state_dir": str(tmp_path / "state")})
    p.ledger.write("tok", state="terminated", instance_ids=["i-1", "i-2"], ended_at=0.0)
    handle = JobHandle("ec2", "aws", "ec2-tok", {"token": "tok", "instance_ids": ["i-1", "i-2"], "hosts": ["10.0.0.1"],
                                                 "ssh_job_id": "ssh-1", "ssh": {"hosts": []}})
    (line,) = p.logs(handle)   # no ssh tried (the addresses are gone: each try would wait for ssh's timeouts)
    assert line.startswith("[foundry] no logs: they were on the instances of job ec2-tok (i-1, i-2), terminated")
    assert "--follow" in line
