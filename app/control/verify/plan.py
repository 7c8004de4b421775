"""Where `foundry verify-resume` stops a run: pure, no I/O.

N steps and K stops: a checkpoint every g = N // (K + 1) batches and a stop after batches g, 2g, ...
Stops alternate between a graceful SIGTERM (the trainer finishes the step, checkpoints and exits
"paused") and a kill -9 once a checkpoint of that batch or later is published (nothing graceful: the
next process resumes from what the store holds). Each world size gets its own straight run and its
own stopped run; their losses must match bit for bit, which only the same world size promises
(docs/resume.md: another world size reduces gradients in another order).
"""

from __future__ import annotations

from dataclasses import dataclass

from foundry.plugins.errors import ConfigError

MAX_WORLD_SIZE = 64


@dataclass(frozen=True)
class Stop:
    kind: str  # "term" (SIGTERM, a pause) or "kill" (kill -9 after a published checkpoint)
    at: int  # the batch after which the stop is delivered

    def describe(self) -> str:
        return f"SIGTERM after batch {self.at}" if self.kind == "term" else f"kill -9 after checkpoint >= batch {self.at}"


@dataclass(frozen=True)
class Plan:
    steps: int
    stops: tuple[Stop, ...]
    world_sizes: tuple[int, ...]
    save_every: int  # batches between checkpoints (save_interval)


def parse_world_sizes(text: str) -> tuple[int, ...]:
    sizes = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= MAX_WORLD_SIZE:
            raise ConfigError(f"--world-sizes {text!r}: {part!r} is not a process count from 1 to {MAX_WORLD_SIZE}",
                              hint="give comma-separated counts, e.g. --world-sizes 2,1")
        if int(part) not in sizes:
            sizes.append(int(part))
    return tuple(sizes)


def make_plan(steps: int, stops: int, world_sizes: tuple[int, ...]) -> Plan:
    if stops < 1:
        raise ConfigError(f"--stops {stops}: at least one stop is needed to check a resume", hint="use --stops 2")
    if steps < 2 * (stops + 1):
        raise ConfigError(f"--steps {steps} is too few for {stops} stops",
                          hint=f"give --steps {2 * (stops + 1)} or more (two batches or more between stops)")
    if not world_sizes:
        raise ConfigError("no world size given", hint="e.g. --world-sizes 2,1")
    every = steps // (stops + 1)
    kinds = ("term", "kill")
    return Plan(steps=steps, stops=tuple(Stop(kinds[i % 2], every * (i + 1)) for i in range(stops)),
                world_sizes=tuple(world_sizes), save_every=every)
