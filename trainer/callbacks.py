"""Callbacks: objects with any of the event methods below; each gets the Trainer.

Events, in order: fit_start, (batch_end, [eval_end], [checkpoint_published])*, epoch_end, fit_end.
`checkpoint_published` fires on the main thread at the first batch boundary after the background
upload of a checkpoint finished and `latest` points at it.
"""

from __future__ import annotations

from typing import Any

EVENTS = ("fit_start", "batch_end", "epoch_end", "eval_end", "checkpoint_published", "fit_end")


class Callback:
    """Base class (optional: any object with some of these methods works)."""

    def fit_start(self, trainer) -> None: ...
    def batch_end(self, trainer) -> None: ...
    def epoch_end(self, trainer) -> None: ...
    def eval_end(self, trainer, metrics: dict[str, float]) -> None: ...
    def checkpoint_published(self, trainer, name: str) -> None: ...
    def fit_end(self, trainer) -> None: ...


class CallbackList:
    def __init__(self, callbacks: list[Any]):
        self.callbacks = list(callbacks)

    def fire(self, event: str, trainer, *args: Any) -> None:
        for cb in self.callbacks:
            method = getattr(cb, event, None)
            if method is not None:
                method(trainer, *args)
