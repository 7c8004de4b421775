"""Per-cluster Slurm options a multi-cluster user needs: each cluster's own slurm.conf (or environment)
for its commands, whatever the foundry process's environment; a working directory per job."""

from __future__ import annotations

import os
import stat

import pytest

from foundry.backends.compute.slurm import SlurmProvider
from foundry.backends.compute.slurm.config import SlurmConfig
from foundry.plugins.compute import JobRequest
from foundry.plugins.errors import ConfigError


def fake_sinfo(tmp_path, name: str):
    """An `sinfo` on PATH that prints one node named after the SLURM_CONF it was given."""
    bin_dir = tmp_path / name
    bin_dir.mkdir()
    exe = bin_dir / "sinfo"
    exe.write_text('#!/bin/sh\necho "$(basename "$(dirname "$SLURM_CONF")")-node|2|(null)|idle|p*"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def test_two_clusters_side_by_side_use_their_own_slurm_conf(tmp_path, monkeypatch):
    bin_dir = fake_sinfo(tmp_path, "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_CONF", "/etc/wrong/slurm.conf")      # the foundry process's own: ignored
    a = SlurmProvider({"slurm_conf": "/etc/alpha/slurm.conf"})
    b = SlurmProvider({"env": {"SLURM_CONF": "/etc/beta/slurm.conf"}})
    assert [n["name"] for n in a.describe()["node_list"]] == ["alpha-node"]
    assert [n["name"] for n in b.describe()["node_list"]] == ["beta-node"]


def test_env_option_is_checked():
    with pytest.raises(ConfigError, match="env must map"):
        SlurmConfig.from_dict({"env": {"BAD NAME": "x"}})
    with pytest.raises(ConfigError, match="env must map"):
        SlurmConfig.from_dict({"env": ["SLURM_CONF=/x"]})
    assert SlurmConfig.from_dict({"slurm_conf": "/a", "env": {"X": 1}}).command_env() == {"X": "1", "SLURM_CONF": "/a"}


def test_ssh_clusters_pass_the_environment_to_the_remote_command():
    cli = SlurmProvider({"ssh_host": "login", "slurm_conf": "/etc/b/slurm.conf"}).cli
    assert cli.env == {"SLURM_CONF": "/etc/b/slurm.conf"}


def _request(**kw) -> JobRequest:
    return JobRequest(run_name="r", run_id="i", resumption=0, command=["train.py"], nodes=2, procs_per_node=1, **kw)


def test_jobs_start_in_the_runs_submit_dir_or_the_clusters_workdir():
    plain = SlurmProvider({}).dryrun(_request(extra={"submit_dir": "/home/u/project"}))
    assert "#SBATCH --chdir=/home/u/project" in plain.artifacts["sbatch"]
    fixed = SlurmProvider({"workdir": "/shared/proj"}).dryrun(_request(extra={"submit_dir": "/home/u/project"}))
    assert "#SBATCH --chdir=/shared/proj" in fixed.artifacts["sbatch"]
    explicit = SlurmProvider({"workdir": "/shared/proj"}).dryrun(_request(workdir="/w", extra={}))
    assert "#SBATCH --chdir=/w" in explicit.artifacts["sbatch"]


def test_rank_wrapper_gives_every_rank_its_node_rank():
    script = SlurmProvider({}).dryrun(_request(extra={})).artifacts["rank.sh"]
    assert "export NODE_RANK=${GROUP_RANK:-${NODE_RANK:-0}}" in script
