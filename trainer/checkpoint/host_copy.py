"""The only part of a save that stalls training: copying model + optimizer state into host memory.

`HostBuffers` is reusable host memory (pinned on a GPU): with at most one checkpoint in flight the
previous copy is free again when the next save starts, so no save allocates or page-faults.

`StateSnapshot` adds a copy plan, built once after the first step: which live tensor goes into
which buffer, and the output tree (DTensor wrappers included) around the buffers. A save then
checks a cheap fingerprint of the live state (parameter storages, optimizer state objects), copies
tensor by tensor from a flat list and refreshes the optimizer's hyperparameters; it does not call
get_state_dict, re-walk the tree or build wrappers (together as long as the copy itself for a model
with a few hundred parameters on CPU). When the fingerprint differs (an optimizer replaced a state
tensor, a parameter got new storage, state appeared for a parameter) the plan is rebuilt: slower
that once, never stale.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch

from ..torch_compat import dtensor_like, dtensor_type, foreach_copy_, local_tensor
from .state import _alias_key, _leaves, live_model_optim_state, to_host


class HostBuffers:
    """Reusable host memory for the checkpoint copy, one buffer per tensor path.

    `reserve` allocates them ahead of the first save (in a background thread, pages touched), so
    the first save stalls no longer than the others. A DTensor (FSDP) is copied shard by shard:
    only the local shard goes to host memory, wrapped back into a DTensor with the same sharding
    spec, so DCP writes it as it is and the full layout gathers it off the training thread. A
    tensor shared under several names (tied weights) is copied once and stays shared in the copy.
    """

    def __init__(self, pin: bool = False):
        self.pin = pin
        self._buffers: dict[str, torch.Tensor] = {}
        self._reserving: threading.Thread | None = None

    def _buffer(self, path: str, like: torch.Tensor) -> torch.Tensor:
        buf = self._buffers.get(path)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype or like.is_sparse:
            buf = torch.empty(like.shape, dtype=like.dtype, device="cpu", pin_memory=self.pin and not like.is_sparse)
            self._buffers[path] = buf
        return buf

    def allocate(self, tree: Any) -> None:
        """Allocate (and touch) buffers shaped like `tree`."""
        for path, t in _leaves(tree):
            self._buffer(path, _meta(t)).zero_()  # zero_ faults the pages in now, not during the copy

    def reserve(self, tree: Any) -> None:
        """`allocate` in a background thread."""
        self._reserving = threading.Thread(target=self.allocate, args=(tree,), name="foundry-host-buffers",
                                           daemon=True)
        self._reserving.start()

    @property
    def reserved(self) -> bool:
        return self._reserving is not None or bool(self._buffers)

    def _ready(self) -> None:
        if self._reserving is not None:
            self._reserving.join()
            self._reserving = None

    def plan(self, tree: Any) -> tuple[Any, list[tuple[torch.Tensor, torch.Tensor]]]:
        """(the copy's tree over the buffers, [(live tensor, its buffer)]) without copying."""
        self._ready()
        seen: dict[tuple, Any] = {}
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = []

        def visit(node: Any, path: str) -> Any:
            if isinstance(node, torch.Tensor):
                key = _alias_key(node)
                if key in seen:
                    return seen[key]
                local = local_tensor(node)
                src = local.detach()
                buf = self._buffer(path, src)
                pairs.append((src, buf))
                out = dtensor_like(buf, node) if local is not node else buf
                seen[key] = out
                return out
            if isinstance(node, dict):
                return {k: visit(v, f"{path}/{k}") for k, v in node.items()}
            if isinstance(node, (list, tuple)):
                return type(node)(visit(v, f"{path}/{i}") for i, v in enumerate(node))
            return node

        return visit(tree, ""), pairs

    def run(self, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Copy every live tensor into its buffer; returns when the copies have landed."""
        self._ready()
        if not pairs:
            return
        srcs, bufs = (list(side) for side in zip(*pairs))
        try:  # one dispatch for all: a few microseconds per tensor less than a loop of copy_
            foreach_copy_(bufs, srcs, non_blocking=self.pin)
        except (RuntimeError, TypeError, NotImplementedError):  # a pair it cannot take: one by one
            for src, buf in pairs:
                buf.copy_(src, non_blocking=self.pin)
        if any(src.device.type != "cpu" for src in srcs) and torch.cuda.is_available():
            torch.cuda.synchronize()  # the non-blocking copies must land before training moves on

    def copy(self, tree: Any) -> Any:
        """Copy every tensor of `tree` into the host buffers; returns the copy (same structure)."""
        out, pairs = self.plan(tree)
        self.run(pairs)
        return out


def _meta(t: torch.Tensor) -> torch.Tensor:
    local = local_tensor(t)
    return torch.empty(local.shape, dtype=local.dtype, device="meta")


def sharded_params(model) -> bool:
    """The model's parameters are DTensors (FSDP): every rank holds a part of the state."""
    dtensor = dtensor_type()
    return dtensor is not None and any(isinstance(p, dtensor) for p in model.parameters())


def _state_values(optimizers: list) -> list:
    return [v for opt in optimizers for st in opt.state.values() for v in st.values()]


def live_fingerprint(model, optimizers: list) -> tuple:
    """Changes whenever the live tensors a plan copies from may have changed: a parameter or buffer
    with other storage, an optimizer state value that is another object, a new state entry. Sound
    only while the plan keeps those storages (its copy sources) and objects (`_Plan.alive`) alive:
    then no address or id can be reused by a replacement."""
    storages = tuple(local_tensor(t).data_ptr() for t in model.parameters())
    storages += tuple(t.data_ptr() for t in model.buffers())
    states = tuple(id(v) for v in _state_values(optimizers))
    groups = tuple(len(g["params"]) for opt in optimizers for g in opt.param_groups)
    return storages, states, groups


_IMMUTABLE = (type(None), bool, int, float, str)


def _plain(tree: Any, scalars_ok: bool) -> bool:
    """Every leaf a tensor (or, where the fingerprint covers the values' identity, an immutable scalar)."""
    if isinstance(tree, torch.Tensor) or (scalars_ok and isinstance(tree, _IMMUTABLE)):
        return True
    if isinstance(tree, dict):
        return all(_plain(v, scalars_ok) for v in tree.values())
    if isinstance(tree, (list, tuple)):
        return all(_plain(v, scalars_ok) for v in tree)
    return False


@dataclass
class _Plan:
    fingerprint: tuple | None  # None: not reusable, planned again at every save
    tree: Any  # the copy's tree over the buffers
    pairs: list[tuple[torch.Tensor, torch.Tensor]]
    groups: list[dict[str, Any]] | None  # the planned optimizer param_groups (their "params" names)
    alive: list  # the optimizer state values the fingerprint names by id, kept from being freed


class StateSnapshot:
    """Model + optimizer state copied into HostBuffers through a plan built once (see the module)."""

    def __init__(self, pin: bool = False):
        self.buffers = HostBuffers(pin=pin)
        self._plan: _Plan | None = None
        self._preparing: threading.Thread | None = None
        self.replanned = 0  # plans built again because the live state changed (each a slower save)

    @property
    def prepared(self) -> bool:
        return self._preparing is not None or self._plan is not None

    def prepare(self, model, optimizers: list) -> None:
        """After a step (optimizer state exists): read the live state now; allocate the buffers
        (pages touched) and build the plan in a background thread, so the first save stalls no
        longer than the next ones."""
        tree = live_model_optim_state(model, optimizers)
        fingerprint, alive = live_fingerprint(model, optimizers), _state_values(optimizers)

        def build() -> None:
            self.buffers.allocate(tree)
            self._plan = self._make(tree, fingerprint, alive)

        self._preparing = threading.Thread(target=build, name="foundry-host-buffers", daemon=True)
        self._preparing.start()

    def take(self, model, optimizers: list) -> Any:
        """A host copy of the live state (same structure as live_model_optim_state), valid until
        the next take: the buffers and the tree are reused."""
        if self._preparing is not None:
            self._preparing.join()
            self._preparing = None
        plan = self._plan
        fingerprint = live_fingerprint(model, optimizers)
        if plan is None or plan.fingerprint != fingerprint:
            self.replanned += plan is not None and plan.fingerprint is not None
            plan = self._plan = self._make(live_model_optim_state(model, optimizers), fingerprint,
                                           _state_values(optimizers))
        self.buffers.run(plan.pairs)
        if plan.groups is not None:  # hyperparameters change (schedulers): read at every save
            live = [g for opt in optimizers for g in opt.param_groups]
            plan.tree["optim"]["param_groups"] = [
                {**{k: to_host(v) for k, v in g.items() if k != "params"}, "params": planned["params"]}
                for g, planned in zip(live, plan.groups)]
        return plan.tree

    def _make(self, tree: dict, fingerprint: tuple, alive: list) -> _Plan:
        out, pairs = self.buffers.plan(tree)
        optim = tree.get("optim", {})
        groups = optim.get("param_groups")
        reusable = (_plain(tree.get("model", {}), scalars_ok=False)
                    and _plain({k: v for k, v in optim.items() if k != "param_groups"}, scalars_ok=True)
                    and isinstance(groups, list) and all(isinstance(g, dict) and "params" in g for g in groups))
        if not reusable:  # a leaf the fingerprint does not cover might change in place
            return _Plan(fingerprint=None, tree=out, pairs=pairs, groups=None, alive=[])
        return _Plan(fingerprint=fingerprint, tree=out, pairs=pairs, groups=groups, alive=alive)
