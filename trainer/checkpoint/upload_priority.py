"""The CPU priority of the checkpoint's background thread (serialize, hash, upload) and of the
transfer threads it starts: on a small machine they compete with the training thread for its
core, and a step during an upload took 1.84x one without (docs/bench-checkpoint-throughput.md).

Linux keeps a nice value and a scheduling policy per thread, and a new thread inherits its
creator's, so lowering the background thread once covers the transfer pools it starts. The
training thread keeps its priority: while it waits for an upload, the upload gets the CPU.

    normal  unchanged
    low     nice 19 (default): the upload runs on whatever CPU the loop leaves
    idle    SCHED_IDLE: only when nothing else of the same user or machine wants the CPU
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from foundry.plugins.errors import ConfigError

PRIORITIES = ("normal", "low", "idle")
log = logging.getLogger("foundry.trainer.checkpoint")


def check_priority(priority: str) -> None:
    if priority not in PRIORITIES:
        raise ConfigError(f"unknown checkpoint_upload_priority {priority!r}", hint="use normal, low or idle")


def lower_this_thread(priority: str) -> str:
    """Apply `priority` to the calling thread; returns what was applied (a platform or a policy
    that refuses leaves it `normal`, or `low` instead of `idle`: never an error)."""
    if priority == "normal" or not sys.platform.startswith("linux"):  # elsewhere these calls mean the process
        return "normal"
    if priority == "idle" and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # 0: this thread on Linux
            return "idle"
        except OSError as exc:
            log.debug("SCHED_IDLE refused for the checkpoint thread (%s); using nice 19", exc)
    try:
        # on Linux PRIO_PROCESS with a thread id sets that thread only
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except OSError as exc:
        log.debug("could not lower the checkpoint thread's priority (%s)", exc)
        return "normal"
    return "low"
