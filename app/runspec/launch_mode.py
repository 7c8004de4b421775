"""How a run's `command` is started on each node: `launch:` in the run spec.

    launch: per_process   Foundry's default: torchrun starts the command once per device (process),
                          with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set.
    launch: per_node      mcli's semantics: the command runs once per node and starts the ranks
                          itself (composer, torchrun, deepspeed, accelerate launch). It gets
                          NODE_RANK, NUM_NODES, LOCAL_WORLD_SIZE (processes per node), WORLD_SIZE
                          (all processes), MASTER_ADDR and MASTER_PORT, as mcli provides them.
    launch: auto          (default) per_node when the command starts the ranks itself, as mcli
                          YAML does (`composer train.py ...`, `torchrun ...`); else per_process.
"""

from __future__ import annotations

import re
import shlex

PER_PROCESS, PER_NODE, AUTO = "per_process", "per_node", "auto"
MODES = (AUTO, PER_PROCESS, PER_NODE)

_SEPARATORS = re.compile(r"\n|;|&&|\|\||\||\(|\)|`|\$\(")
_PREFIXES = {"exec", "env", "time", "nohup", "sudo", "srun"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_LAUNCHER_MODULES = {"torch.distributed.run", "torch.distributed.launch", "composer.cli.launcher", "deepspeed"}


def _words(part: str) -> list[str]:
    try:
        return shlex.split(part)
    except ValueError:      # an unbalanced quote in one part: its words, roughly
        return part.split()


def starts_ranks_itself(command: str | list[str] | None) -> bool:
    """Whether a simple command of `command` is a rank launcher (composer, torchrun, deepspeed,
    accelerate launch, python -m torch.distributed.run ...)."""
    if command is None:
        return False
    parts = [shlex.join(command)] if isinstance(command, list) else _SEPARATORS.split(command)
    for part in parts:
        words = _words(part)
        while words and (words[0] in _PREFIXES or _ASSIGNMENT.match(words[0]) or words[0].startswith("-")):
            words = words[1:]
        if not words:
            continue
        head = words[0].rsplit("/", 1)[-1]
        if head in ("composer", "torchrun", "deepspeed"):
            return True
        if head == "accelerate" and words[1:2] == ["launch"]:
            return True
        if _PYTHON.match(head) and "-m" in words[1:3]:
            module = words[words.index("-m") + 1] if words.index("-m") + 1 < len(words) else ""
            if module in _LAUNCHER_MODULES:
                return True
    return False


def resolve_launch(mode: str, command: str | list[str] | None) -> str:
    if mode != AUTO:
        return mode
    return PER_NODE if starts_ranks_itself(command) else PER_PROCESS
