"""foundry.trainer: an embedded PyTorch trainer that checkpoints to object storage without
stalling, publishes checkpoints atomically, and resumes exactly (also on another world size).

Imports only foundry.plugins; data state travels through state_dict()/load_state_dict().
"""

from __future__ import annotations

from typing import Any

__all__ = ["Trainer", "Time", "TimeUnit", "Timestamp", "Callback", "Logger", "JSONLinesLogger",
           "WarmupCosine", "WarmupConstant", "seed_everything", "PAUSED_EXIT_CODE"]

_LAZY = {
    "Trainer": ".trainer", "Callback": ".callbacks", "Logger": ".loggers", "JSONLinesLogger": ".loggers",
    "WarmupCosine": ".schedulers", "WarmupConstant": ".schedulers", "seed_everything": ".seeding",
    "Time": ".time", "TimeUnit": ".time", "Timestamp": ".time",
}


def __getattr__(name: str) -> Any:  # torch is imported only when the trainer is used
    if name == "PAUSED_EXIT_CODE":
        from foundry.plugins.compute import PAUSED_EXIT_CODE

        return PAUSED_EXIT_CODE
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(name)
