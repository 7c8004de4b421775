"""StreamingDataLoader's workers leave the pause signals to the main process (SIGTERM to the whole
process group must not kill them) yet never hang the exit, and iter() does its RNG draws at once,
not at the first next()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import torch

from foundry.streaming import StreamingDataLoader


def test_workers_ignore_pause_signals_and_run_the_users_init():
    called = []
    loader = StreamingDataLoader(list(range(8)), batch_size=2, num_workers=2, worker_init_fn=called.append)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        loader.worker_init_fn(3)  # what each worker runs first
        assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in saved)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert called == [3]


def test_iter_draws_from_the_rng_at_once():
    loader = StreamingDataLoader(list(range(8)), batch_size=2, num_workers=0)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    batches = iter(loader)  # the DataLoader's base-seed draw happens here
    assert not torch.equal(torch.get_rng_state(), before)
    after_iter = torch.get_rng_state()
    next(batches)
    assert torch.equal(torch.get_rng_state(), after_iter)


EXIT_WITH_LIVE_WORKERS = """
import sys
from foundry.streaming import StreamingDataLoader
loader = StreamingDataLoader(list(range(64)), batch_size=2, num_workers=2, persistent_workers=sys.argv[1] == "1")
if sys.argv[1] == "1":
    list(loader)  # an epoch done, the persistent workers wait for the next one
else:
    batches = iter(loader)
    next(batches)  # a loop left early, its workers still running
print("exiting", flush=True)
"""


@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.subprocess
def test_the_process_exits_with_its_workers_alive(persistent):
    """Workers ignore SIGTERM, which multiprocessing sends them at exit before an unbounded join:
    the loader stops them itself first, so the exit does not hang."""
    proc = subprocess.Popen([sys.executable, "-c", EXIT_WITH_LIVE_WORKERS, str(int(persistent))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the workers too (they share the session)
        proc.communicate()
        pytest.fail("the process hung at exit with live DataLoader workers")
    assert proc.returncode == 0 and out.strip() == "exiting", err
