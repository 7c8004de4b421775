import pytest

from foundry.plugins.errors import ConfigError
from foundry.plugins.launch_env import LaunchEnv


def test_alone_by_default():
    assert LaunchEnv.detect({}) == LaunchEnv()


def test_torchrun_and_control_plane_variables():
    env = LaunchEnv.detect({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                            "RESUMPTION_INDEX": "2", "RUN_NAME": "gpt"})
    assert env == LaunchEnv(rank=3, world_size=4, local_rank=1, local_world_size=2, resumption_index=2, run_name="gpt")


def test_without_local_sizes_every_rank_is_on_this_node():
    env = LaunchEnv.detect({"RANK": "1", "WORLD_SIZE": "2"})
    assert (env.local_rank, env.local_world_size) == (1, 2)


@pytest.mark.parametrize("environ", [
    {"RANK": "x"}, {"RANK": "2", "WORLD_SIZE": "2"}, {"WORLD_SIZE": "0"},
    {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "3"},
])
def test_inconsistent_values_are_config_errors(environ):
    with pytest.raises(ConfigError):
        LaunchEnv.detect(environ)


def test_one_slurm_task_per_rank_gives_the_local_sizes():
    slurm = {"RANK": "5", "WORLD_SIZE": "8", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_TASKS_PER_NODE": "4(x2)"}
    env = LaunchEnv.detect(slurm)
    assert (env.local_rank, env.local_world_size) == (1, 4)
    # srun started one launcher per node (torchrun): its own variables win, Slurm's task count is not the ranks'
    per_node = {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "SLURM_NTASKS": "2",
                "SLURM_LOCALID": "0", "SLURM_TASKS_PER_NODE": "1(x2)"}
    assert LaunchEnv.detect(per_node) == env
    with pytest.raises(ConfigError, match="same number"):
        LaunchEnv.detect({**slurm, "SLURM_TASKS_PER_NODE": "5,3"})


def test_one_topology_type():
    """The trainer's DistEnv is LaunchEnv; streaming's Topology only adds its detect(), no fields."""
    from dataclasses import fields

    from foundry.streaming.topology import Topology
    from foundry.trainer.dist import DistEnv

    assert DistEnv is LaunchEnv and issubclass(Topology, LaunchEnv)
    assert [f.name for f in fields(Topology)] == [f.name for f in fields(LaunchEnv)]
    env = LaunchEnv(rank=5, world_size=8, local_rank=1, local_world_size=4)
    assert (env.node, env.num_nodes, env.is_main, env.distributed, env.alone_on_node) == (1, 2, False, True, False)
