"""How the full suite splits over pytest-xdist workers (`scripts/test.sh --all` runs it with
`-n N --dist loadgroup --no-loadscope-reorder`; a pytest plugin, tests/conftest.py loads it).

Most of the suite's wall time is tests waiting on processes they started (runs, torchrun, servers,
a frozen controller), so a few workers overlap those waits even on 2 cores. What must not overlap
stays on one worker, as one group:
- `multinode`: the namespace nodes have fixed names and addresses (scripts/infra/multinode);
- `slurm`: the single-node Slurm daemons are the machine's (one slurmctld, one slurmd);
- `mosaic`: mosaicml-streaming's processes coordinate through /dev/shm names of the machine's
  (000000_barrier, _locals, ...) that two of its multi-rank jobs at once could share (a 2-rank
  mixture test hung with 3 workers; that this was the cause is likely, not proven);
- every other test file is its own group, so a module's shared launch (a module-scoped torchrun,
  a trained reference) runs once, on one worker.
The groups go out longest first (multinode, Slurm, mosaic, then the files in collection order), so
the longest one does not start last. In one process (no xdist) nothing here applies.
"""

from __future__ import annotations

import pytest

from support.tiers import TESTS

FIRST = ("multinode", "slurm", "mosaic")   # the groups that take longest, in the order they go out


def group_of(item) -> str:
    try:
        parts = item.path.relative_to(TESTS).parts
    except ValueError:
        parts = (item.path.name,)
    if parts[0] == "multinode":
        return "multinode"
    if "slurm_cluster" in item.fixturenames:   # support/slurm.py's daemons (also what marks it `slurm`)
        return "slurm"
    if "mosaic_peer" in item.fixturenames:      # support/peers.py's mosaicml-streaming environment
        return "mosaic"
    return "/".join(parts)


@pytest.hookimpl(tryfirst=True)   # before xdist's worker names each test's group from these marks
def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):   # not an xdist worker: one process keeps the collection's order
        return
    groups = {id(item): group_of(item) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(groups[id(item)], len(FIRST)))   # stable: the rest keep their order
