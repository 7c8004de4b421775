"""Time units of training: `ba` (batches), `ep` (epochs), `sp` (samples), `tok` (tokens), `dur`
(a fraction of max_duration), and the Timestamp that counts them (part of every checkpoint).

    Time.parse("1000ba"), Time.parse("2ep"), Time.parse("0.1dur"), Time.parse("5e6tok")
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any

from foundry.plugins.errors import ConfigError


class TimeUnit(str, Enum):
    BATCH = "ba"
    EPOCH = "ep"
    SAMPLE = "sp"
    TOKEN = "tok"
    DURATION = "dur"


_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ba|ep|sp|tok|dur)\s*$")
# Far beyond any training run (1e18 tokens); keeps float->int exact-ish and never inf/OverflowError.
MAX_COUNT = 1e18
_UNITS_HINT = "use a number and a unit: 1000ba (batches), 2ep (epochs), 50000sp (samples), 1e6tok (tokens), 0.25dur"


@dataclass(frozen=True)
class Time:
    value: float
    unit: TimeUnit

    @classmethod
    def parse(cls, text: "str | int | Time", default_unit: TimeUnit | None = None) -> "Time":
        if isinstance(text, Time):
            return text
        if isinstance(text, bool):
            raise ConfigError(f"invalid time {text!r}", hint=_UNITS_HINT)
        if isinstance(text, int) and default_unit is not None:
            return cls._make(text, default_unit, str(text))
        if not isinstance(text, str):
            raise ConfigError(f"invalid time {text!r}: expected a string like '100ba'", hint=_UNITS_HINT)
        match = _PATTERN.match(text)
        if not match:
            raise ConfigError(f"invalid time {text!r}", hint=_UNITS_HINT)
        return cls._make(float(match.group(1)), TimeUnit(match.group(2)), text)

    @classmethod
    def _make(cls, value: float, unit: TimeUnit, text: str) -> "Time":
        if not value <= MAX_COUNT:  # also inf, nan and ints too big for a float
            raise ConfigError(f"invalid time {text!r}: too large (at most {MAX_COUNT:.0e})", hint=_UNITS_HINT)
        if value < 0:
            raise ConfigError(f"invalid time {text!r}: negative", hint=_UNITS_HINT)
        if unit is TimeUnit.DURATION:
            if value > 1:
                raise ConfigError(f"invalid time {text!r}: 'dur' is a fraction of max_duration in [0, 1]")
            return cls(float(value), unit)
        if float(value) != int(value):
            raise ConfigError(f"invalid time {text!r}: {unit.value} needs a whole number", hint=_UNITS_HINT)
        return cls(int(value), unit)

    def __str__(self) -> str:
        return f"{self.value}{self.unit.value}"

    def resolve(self, max_duration: "Time") -> "Time":
        """A `dur` fraction becomes an absolute time in max_duration's unit (rounded up, at least 1)."""
        if self.unit is not TimeUnit.DURATION:
            return self
        if max_duration.unit is TimeUnit.DURATION:
            raise ConfigError("max_duration cannot be in 'dur'", hint=_UNITS_HINT)
        value = max(1, int(-(-self.value * max_duration.value // 1))) if self.value > 0 else 0
        return Time(value, max_duration.unit)

    def to_batches(self, max_duration: "Time | None" = None, batches_per_epoch: int | None = None) -> int:
        """This time as a batch count (for schedulers); samples/tokens cannot be converted."""
        t = self.resolve(max_duration) if max_duration is not None else self
        if t.unit is TimeUnit.BATCH:
            return int(t.value)
        if t.unit is TimeUnit.EPOCH:
            if batches_per_epoch is None:
                raise ConfigError(f"cannot convert {t} to batches: the train dataloader has no len()",
                                  hint="give the time in batches (e.g. 100ba)")
            return int(t.value) * batches_per_epoch
        raise ConfigError(f"cannot convert {t} to batches", hint="give the time in ba, ep or dur")


@dataclass
class Timestamp:
    """Where training is. Counts are global (all ranks together) and only go forward."""

    epoch: int = 0
    batch: int = 0
    sample: int = 0
    token: int = 0
    batch_in_epoch: int = 0
    sample_in_epoch: int = 0
    token_in_epoch: int = 0
    wall_time: float = 0.0  # seconds spent training, summed over resumptions

    def copy(self) -> "Timestamp":
        new = Timestamp.__new__(Timestamp)
        new.__dict__.update(self.__dict__)
        return new

    def get(self, unit: TimeUnit) -> int:
        return {TimeUnit.BATCH: self.batch, TimeUnit.EPOCH: self.epoch,
                TimeUnit.SAMPLE: self.sample, TimeUnit.TOKEN: self.token}[unit]

    def after_batch(self, samples: int, tokens: int, seconds: float) -> None:
        self.batch += 1
        self.batch_in_epoch += 1
        self.sample += samples
        self.sample_in_epoch += samples
        self.token += tokens
        self.token_in_epoch += tokens
        self.wall_time += seconds

    def after_epoch(self) -> None:
        self.epoch += 1
        self.batch_in_epoch = self.sample_in_epoch = self.token_in_epoch = 0

    def reached(self, time: Time) -> bool:
        if time.unit is TimeUnit.DURATION:
            raise ConfigError("resolve 'dur' against max_duration before comparing")
        return self.get(time.unit) >= time.value

    def state_dict(self) -> dict[str, Any]:
        return asdict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        names = {f.name for f in fields(self)}
        unknown = set(state) - names
        if unknown:
            raise ConfigError(f"timestamp state has unknown fields {sorted(unknown)}")
        for key, value in state.items():
            setattr(self, key, value)


def crossed(interval: Time, before: Timestamp, after: Timestamp, epoch_ended: bool = False) -> bool:
    """True when `after` crossed a multiple of `interval` since `before` (an event is due).

    Batch/sample/token intervals fire after batches; epoch intervals only at an epoch's end.
    """
    if interval.value <= 0:
        return False
    unit = interval.unit
    if unit is TimeUnit.DURATION:
        raise ConfigError("resolve 'dur' intervals against max_duration first")
    if unit is TimeUnit.EPOCH:
        return epoch_ended and after.epoch % interval.value == 0
    return after.get(unit) // interval.value > before.get(unit) // interval.value
