"""The checkpoint's background thread runs at a lower CPU priority than the training thread, and
so do the transfer threads it starts (Linux: per thread, inherited); a bad setting is one error."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from foundry.plugins.errors import ConfigError
from foundry.trainer.checkpoint.upload_priority import lower_this_thread
from foundry.trainer.config import TrainerConfig

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is Linux's")


def _nice_of(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


@linux
def test_low_lowers_the_thread_and_the_threads_it_starts_not_the_caller():
    seen: dict[str, int | str] = {}

    def background() -> None:
        seen["applied"] = lower_this_thread("low")
        seen["self"] = _nice_of(threading.get_native_id())
        child = threading.Thread(target=lambda: seen.__setitem__("child", _nice_of(threading.get_native_id())))
        child.start()
        child.join()

    before = _nice_of(threading.get_native_id())
    worker = threading.Thread(target=background)
    worker.start()
    worker.join()
    assert seen == {"applied": "low", "self": 19, "child": 19}
    assert _nice_of(threading.get_native_id()) == before  # the training thread keeps its priority


@linux
def test_idle_or_low_never_fails():
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.append(lower_this_thread("idle")))
    worker.start()
    worker.join()
    assert result[0] in ("idle", "low")


def test_unknown_priority_is_one_config_error():
    with pytest.raises(ConfigError, match="checkpoint_upload_priority"):
        TrainerConfig(run_name="r", max_duration="1ba", checkpoint_upload_priority="fast")
