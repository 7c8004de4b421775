"""Slurm provider pieces without a cluster: config validation, the rendered script, output parsers."""

from __future__ import annotations

import pytest

from foundry.backends.compute.slurm import SlurmProvider
from foundry.backends.compute.slurm import commands as sc
from foundry.backends.compute.slurm.config import SlurmConfig
from foundry.backends.compute.slurm.script import job_environment, parse_comment, render_env
from foundry.plugins.compute import ComputeProvider, JobRequest, SecretMount
from foundry.plugins.errors import ConfigError


def _request(**kw) -> JobRequest:
    base = dict(run_name="gpt", run_id="r1", resumption=1, command=["train.py", "--lr", "1e-3"],
                nodes=4, procs_per_node=8, gpus_per_node=8, gpu_type="a100")
    base.update(kw)
    return JobRequest(**base)


def test_provider_implements_the_protocol():
    provider = SlurmProvider({"partition": "gpu"})
    assert isinstance(provider, ComputeProvider)
    assert provider.capabilities.multi_node and provider.capabilities.preemption_notice


def test_sbatch_script_is_a_multi_node_torchrun_launch():
    provider = SlurmProvider({"partition": "gpu", "account": "ml", "time": "04:00:00", "signal": "TERM@120",
                              "jobs_dir": "/shared/jobs", "python": "/opt/py/bin/python",
                              "setup": ["module load cuda"], "cpus_per_task": 16})
    plan = provider.dryrun(_request(env={"WANDB_API_KEY": "s3cr3t"}))
    script = plan.artifacts["sbatch"]
    for expected in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --partition=gpu",
                     "#SBATCH --account=ml", "#SBATCH --time=04:00:00", "#SBATCH --gres=gpu:a100:8",
                     "#SBATCH --signal=B:TERM@120", "#SBATCH --cpus-per-task=16",
                     'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1',
                     '--nnodes="$NNODES"', "--nproc_per_node=8", "--rdzv_backend=c10d",
                     '--rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"', "module load cuda",
                     "RUN_NAME=gpt", "RESUMPTION_INDEX=1", "/opt/py/bin/python train.py --lr 1e-3",
                     "trap foundry_pause TERM", 'source "$FOUNDRY_JOB_DIR/env.sh"'):
        assert expected in script, expected
    assert "s3cr3t" not in "".join(plan.artifacts.values())
    assert plan.request.extra["slurm_job_dir"].startswith("/shared/jobs/gpt-r1-")


def test_dryrun_has_no_side_effects(tmp_path):
    provider = SlurmProvider({"jobs_dir": str(tmp_path / "jobs")})
    request = _request()
    provider.dryrun(request)
    assert not (tmp_path / "jobs").exists()
    assert "slurm_job_dir" not in request.extra


def test_secret_paths_move_into_the_job_folder():
    request = _request(env={"GOOGLE_APPLICATION_CREDENTIALS": "/etc/gcp/key.json", "X": "1"},
                       secret_files=[SecretMount("/etc/gcp/key.json", b"{}")])
    env = job_environment(request, "/jobs/j1")
    assert env["GOOGLE_APPLICATION_CREDENTIALS"] == "/jobs/j1/secrets/etc/gcp/key.json"
    assert env["RUN_ID"] == "r1" and env["RESUMPTION_INDEX"] == "1"
    assert "export X=1" in render_env(env)
    with pytest.raises(ConfigError):
        job_environment(_request(secret_files=[SecretMount("../escape", b"")], env={"A": "../escape"}), "/j")


@pytest.mark.parametrize("raw", [{"time": "forever"}, {"signal": "TERM@soon"}, {"colour": "red"},
                                 {"setup": "module load x"}, {"cpus_per_task": 0}])
def test_bad_cluster_config_is_a_config_error(raw):
    with pytest.raises(ConfigError):
        SlurmConfig.from_dict(raw)


def test_parsers():
    assert sc.parse_sbatch("1234\n") == "1234"
    assert sc.parse_sbatch("77;cluster2") == "77"
    jobs = sc.parse_squeue("12|RUNNING|None|2|foundry|gpt|r1|0|/j\n13|PENDING|Resources|1|\n")
    assert jobs["12"]["state"] == "RUNNING" and parse_comment(jobs["12"]["comment"])["job_dir"] == "/j"
    assert jobs["13"]["reason"] == "Resources" and parse_comment(jobs["13"]["comment"]) is None
    assert sc.parse_scontrol_job("JobId=5 JobState=FAILED Reason=NonZeroExitCode ExitCode=75:0")["ExitCode"] == "75:0"
    assert sc.parse_gres_gpus("gpu:a100:4(S:0-1),shard:2") == 4
    nodes = sc.parse_sinfo("n1|64|gpu:h100:8|idle|gpu*\nn1|64|gpu:h100:8|idle|all\nn2|64|(null)|down*|cpu\n")
    assert [n["name"] for n in nodes] == ["n1", "n2"]
    assert nodes[0]["gpus"] == 8 and nodes[0]["partitions"] == ["gpu", "all"] and nodes[1]["state"] == "down"


def test_python_and_setup_commands_use_the_clusters_interpreter():
    provider = SlurmProvider({"python": "/opt/venv/bin/python", "setup": ["module load cuda"]})
    request = _request(command=["python", "-m", "foundry.trainer"],
                       extra={"setup_commands": ["[ -d repo ] || git clone https://x/repo.git repo"]})
    script = provider.dryrun(request).artifacts["sbatch"]
    assert "/opt/venv/bin/python -m foundry.trainer" in script
    assert "export PATH=/opt/venv/bin:" in script
    assert "module load cuda\n( set -e\n  [ -d repo ] || git clone https://x/repo.git repo\n)" in script
