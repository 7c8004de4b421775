"""StreamingDataLoader's workers leave the pause signals to the main process (SIGTERM to the whole
process group must not kill them), and iter() does its RNG draws at once, not at the first next()."""

from __future__ import annotations

import signal

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
