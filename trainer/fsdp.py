"""FSDP2 wrapping: which modules become their own shard groups, and keeping tied weights tied.

torchtitan's rule: every repeated block (the children of a ModuleList / ModuleDict, e.g.
`self.blocks`) is its own `fully_shard` unit, then the root takes everything else. The container
itself is never sharded (fully_shard rejects it, and a forward that iterates `for block in
self.blocks` must keep working). A parameter shared between modules (a token embedding tied to the
output head) has to live in one FSDP group: a block that shares a parameter with anything outside
itself is left to the root group, so the tie survives sharding. `check_ties` verifies it after
wrapping; a model is never untied silently.
"""

from __future__ import annotations

import logging

from torch import nn

log = logging.getLogger("foundry.trainer")


def tied_groups(model: nn.Module) -> list[list[str]]:
    """Names of the parameters that are one tensor under several names (e.g. [wte.weight, head.weight])."""
    by_id: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(param), []).append(name)
    return [names for names in by_id.values() if len(names) > 1]


def _owns(prefix: str, name: str) -> bool:
    return name.startswith(prefix + ".")


def shard_units(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules to shard before the root: the children of every outermost ModuleList/ModuleDict
    that hold parameters (without one, the root's children), minus any whose parameters are tied to
    a parameter outside it."""
    units: list[tuple[str, nn.Module]] = []
    claimed: list[str] = []
    for name, module in model.named_modules():
        if not name or any(name == c or _owns(c, name) for c in claimed):
            continue
        if isinstance(module, (nn.ModuleList, nn.ModuleDict)):
            claimed.append(name)
            for child_name, child in module.named_children():
                if any(True for _ in child.parameters()):
                    units.append((f"{name}.{child_name}", child))
    if not units:  # no block list (e.g. an nn.Sequential): the top-level children with parameters
        units = [(name, child) for name, child in model.named_children() if any(True for _ in child.parameters())]
    ties = tied_groups(model)
    kept = []
    for name, module in units:
        crosses = [g for g in ties if any(_owns(name, n) for n in g) and not all(_owns(name, n) for n in g)]
        if crosses:
            log.info("FSDP: %s shares %s with another module; it stays in the root group so the tie holds",
                     name, crosses[0])
            continue
        kept.append((name, module))
    return kept


def fully_shard_model(model: nn.Module, mesh=None) -> nn.Module:
    """fully_shard each repeated block, then the root; tied parameters stay one parameter."""
    from torch.distributed.fsdp import fully_shard

    ties_before = tied_groups(model)
    for _, module in shard_units(model):
        fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)
    check_ties(model, ties_before)
    return model


def check_ties(model: nn.Module, expected: list[list[str]]) -> None:
    """Raise if a parameter that was shared under several names is no longer one parameter."""
    from foundry.plugins.errors import ConfigError

    params = dict(model.named_parameters(remove_duplicate=False))
    for names in expected:
        if len({id(params.get(n)) for n in names}) != 1:
            raise ConfigError(f"FSDP untied the shared parameters {names}",
                              hint="report this with your torch version; meanwhile use parallelism='ddp'")
