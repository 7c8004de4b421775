"""mcli run YAML semantics (issue 13 item 7): a command that starts its ranks itself (composer,
torchrun, ...) runs once per node, with mcli's variables; `launch:` switches explicitly; `image`
and `gpu_type` are honoured where a cluster can and refused elsewhere, never ignored."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from foundry.app.runspec import parse_spec
from foundry.app.runspec.launch_mode import starts_ranks_itself

# Each rank records itself; the node-level command records each start.
RANK = textwrap.dedent("""
    import os
    path = os.path.join(os.environ["FOUNDRY_RUN_DIR"], f"rank-{os.environ['RANK']}-of-{os.environ['WORLD_SIZE']}")
    open(path, "w").close()
""")


@pytest.mark.parametrize("command, expected", [
    ("cd llm-foundry/scripts\ncomposer train/train.py /mnt/config/parameters.yaml", True),
    ("torchrun --nproc_per_node=8 train.py", True),
    ("NCCL_DEBUG=INFO /opt/venv/bin/torchrun train.py", True),
    (["python", "-m", "torch.distributed.run", "train.py"], True),
    ("pip install -e . && deepspeed train.py", True),
    ("accelerate launch train.py", True),
    ("python train.py", False),
    ("cd composer && python train.py", False),
    ("echo torchrun", False),
    ("accelerate config", False),
])
def test_commands_that_start_their_ranks_are_recognised(command, expected):
    assert starts_ranks_itself(command) is expected


def test_launch_switch_and_default():
    base = {"name": "x", "compute": {"gpus": 2}}
    assert parse_spec({**base, "command": "composer train.py cfg.yaml"}).launch_mode == "per_node"
    assert parse_spec({**base, "command": "python train.py"}).launch_mode == "per_process"
    assert parse_spec({**base, "command": "python train.py", "launch": "per_node"}).launch_mode == "per_node"
    assert parse_spec({**base, "command": "torchrun t.py", "launch": "per_process"}).launch_mode == "per_process"
    with pytest.raises(Exception, match="launch"):
        parse_spec({**base, "command": "x", "launch": "per_gpu"})


def _spec(tmp_path, command, **extra):
    (tmp_path / "rank.py").write_text(RANK)
    spec = {"name": extra.pop("name", "node-launch"), "command": command, "compute": {"gpus": 2}, **extra}
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(spec))
    return str(path)


TORCHRUN = ("echo start >> $FOUNDRY_RUN_DIR/node-starts; {py} -m torch.distributed.run --nnodes=$NUM_NODES "
            "--node_rank=$NODE_RANK --nproc_per_node=$LOCAL_WORLD_SIZE --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT {rank}")


def _ran(cp, name):
    run_dir = cp.paths.run_dir(name)
    return ((run_dir / "node-starts").read_text().count("start"),
            sorted(p.name for p in run_dir.glob("rank-*")))


@pytest.mark.slow
def test_local_mcli_command_runs_once_per_node_and_starts_its_ranks(cli, cp, tmp_path):
    command = TORCHRUN.format(py=sys.executable, rank=tmp_path / "rank.py")
    code, out, err = cli("run", "-f", _spec(tmp_path, command), "--dry-run")
    assert code == 0 and "LOCAL_WORLD_SIZE=2" in out and "--nproc_per_node=2 --no-python" not in out, err
    code, _, err = cli("run", "-f", _spec(tmp_path, command), "--follow")
    assert code == 0, err
    assert _ran(cp, "node-launch") == (1, ["rank-0-of-2", "rank-1-of-2"])
    # the same command per process (the old behaviour, now explicit) starts once per device
    per_process = f"echo start >> $FOUNDRY_RUN_DIR/node-starts; {sys.executable} {tmp_path / 'rank.py'}"
    code, _, err = cli("run", "-f", _spec(tmp_path, per_process, name="per-proc", launch="per_process"), "--follow")
    assert code == 0, err
    assert _ran(cp, "per-proc") == (2, ["rank-0-of-2", "rank-1-of-2"])


@pytest.mark.slow
@pytest.mark.integration
def test_slurm_mcli_command_runs_once_per_node(cli, cp, tmp_path, slurm_cluster):
    config = slurm_cluster.provider_config(tmp_path / "slurm-jobs")
    config.pop("name"), config.pop("provider")
    cp.create_cluster("hpc", "slurm", config)
    command = TORCHRUN.format(py=sys.executable, rank=tmp_path / "rank.py")
    code, _, err = cli("run", "-f", _spec(tmp_path, command, compute={"cluster": "hpc", "gpus": 2}), "--follow")
    assert code == 0, err
    assert _ran(cp, "node-launch") == (1, ["rank-0-of-2", "rank-1-of-2"])


def test_image_and_gpu_type_are_honoured_or_refused(cli, cp, tmp_path):
    def run(*args, **spec):
        path = tmp_path / "s.yaml"
        path.write_text(json.dumps({"name": "img", "command": "python t.py", **spec}))
        return cli("run", "-f", str(path), "--dry-run", *args)

    code, _, err = run(image="mosaicml/llm-foundry:latest")
    assert code == 2 and "cluster 'local' (local) cannot run container image 'mosaicml/llm-foundry:latest'" in err
    code, _, err = run(compute={"gpu_type": "a100_80gb"})
    assert code == 2 and "cannot choose GPU type 'a100_80gb'" in err
    assert run(compute={"gpu_type": "cpu"})[0] == 0
    cp.create_cluster("hpc", "slurm", {"partition": "debug", "jobs_dir": str(tmp_path / "jobs")})
    code, _, err = run(image="img:1", compute={"cluster": "hpc"})
    assert code == 2 and "cluster 'hpc' (slurm) cannot run container image" in err
    code, out, err = run(compute={"cluster": "hpc", "gpu_type": "a100", "gpus": 2})
    assert code == 0 and "--gres=gpu:a100:2" in out, err
    cp.create_cluster("k8s", "kubernetes", {"namespace": "ml", "context": "none"})
    code, out, err = run(image="img:1", compute={"cluster": "k8s", "gpus": 1})
    assert code == 0 and "image: img:1" in out, err
    # compute.instance: a node selector on the well-known instance-type label; refused where no such choice exists
    code, out, err = run(image="img:1", compute={"cluster": "k8s", "gpus": 1, "instance": "p5.48xlarge"})
    assert code == 0 and "node.kubernetes.io/instance-type: p5.48xlarge" in out, err
    code, _, err = run(compute={"cluster": "hpc", "instance": "p5.48xlarge"})
    assert code == 2 and "cluster 'hpc' (slurm) cannot choose instance type 'p5.48xlarge'" in err
    code, _, err = run(compute={"instance": "p5.48xlarge"})
    assert code == 2 and "cannot choose instance type" in err
    code, out, err = run(image="img:1", command="composer t.py", compute={"cluster": "k8s", "gpus": 4, "nodes": 2})
    plan = _unfolded(out)  # the pod script is a long YAML string: compare its text, not YAML's line folds
    assert code == 0 and "export NODE_RANK=$JOB_COMPLETION_INDEX" in plan and "WORLD_SIZE=4" in plan, err
    assert "torch.distributed.run" not in plan       # the command starts the ranks, not Foundry
    code, out, err = run(image="img:1", command="python t.py", compute={"cluster": "k8s", "gpus": 2})
    plan = _unfolded(out)  # per process: torchrun starts the ranks, and no pod sets the node rank itself
    assert code == 0 and "torch.distributed.run" in plan and "NODE_RANK=$JOB_COMPLETION_INDEX" not in plan, err
    # a provider that cannot start a command once per node refuses it
    from foundry.plugins.compute import Capabilities
    from foundry.backends.compute.kubernetes.provider import KubernetesProvider

    caps = KubernetesProvider.capabilities
    try:
        KubernetesProvider.capabilities = Capabilities(multi_node=True, images=True)
        code, _, err = run(image="img:1", command="composer t.py", compute={"cluster": "k8s", "gpus": 1})
        assert code == 2 and "cannot start the command once per node" in err and "launch: per_process" in err
    finally:
        KubernetesProvider.capabilities = caps


def _unfolded(dry_run_output: str) -> str:
    """The dry run's text with YAML's folding of long double-quoted strings undone (a line ending in
    a backslash continues on the next, whose indentation is dropped; "\\ " is an escaped space)."""
    import re

    return re.sub(r"\\\n\s*", "", dry_run_output).replace("\\ ", " ")
