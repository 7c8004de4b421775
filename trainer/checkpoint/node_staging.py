"""One checkpoint download per node on restore, shared by the node's ranks.

The ranks of a node are those with the same host name (asked of every rank, not inferred from
LOCAL_WORLD_SIZE, so a launcher that leaves it unset cannot make a rank wait for a folder on
another machine). The lowest rank of each node downloads into a folder named after its host, under
the run's staging folder; the others wait for its result (the folder, or its error) and read from
there. Keyed by host, nodes whose run folders share a file system never share a download.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Callable, TypeVar

from foundry.plugins.errors import CheckpointError

from .. import dist as fdist

T = TypeVar("T")


class NodeStaging:
    """`fetch` once per node into root/HOST; `done()` removes that folder once every rank restored."""

    def __init__(self, root: Path, env: fdist.DistEnv):
        self.env = env
        host = socket.gethostname()
        hosts = fdist.all_gather_object(host, env)
        self.leader = hosts.index(host)  # the lowest rank on this host
        self.folder = Path(root) / (host or "localhost")

    @property
    def downloads(self) -> bool:
        return self.env.rank == self.leader

    def fetch(self, fetch: Callable[[Path], T]) -> T:
        """fetch(folder) on the node's leader; every rank returns its leader's result or raises its error."""
        outcome: tuple[str, object] = ("ok", None)
        if self.downloads:
            try:
                result = fetch(self.folder)
                outcome = ("ok", result)
            except Exception as exc:  # the node's other ranks must not wait for a folder that never comes
                outcome = ("error", f"{type(exc).__name__}: {exc}")
                if not self.env.distributed:
                    raise
                fdist.all_gather_object(outcome, self.env)
                raise
        outcomes = fdist.all_gather_object(outcome, self.env)
        status, value = outcomes[self.leader]
        if status == "error":
            raise CheckpointError(f"rank {self.leader} could not download the checkpoint for this node ({value})")
        return value  # type: ignore[return-value]

    def done(self, wait_for_all: bool = True) -> None:
        """The leader removes the download: after every rank restored (a barrier), or at once when
        this rank failed or found nothing (waiting then could hang on a rank that failed too)."""
        if wait_for_all:
            fdist.barrier(self.env)
        if self.downloads:
            shutil.rmtree(self.folder, ignore_errors=True)
