"""Human sizes and counts as mosaicml-streaming 0.13 reads them (`bytes_to_int`, `number_abbrev_to_int`).

`cache_limit="10gb"` is 10 x 1024**3 bytes; `epoch_size="1b"` is 10**9 samples (k, m, b, t are
thousands, millions, billions and trillions). A value mosaic refuses is a ConfigValueError (a
ValueError) here too.
"""

from __future__ import annotations

import re

from foundry.plugins.errors import ConfigValueError

# mosaic's units (powers of 1024), plus the explicit binary names, which mosaic refuses.
_BYTES = {"": 1, "b": 1, "kb": 2**10, "mb": 2**20, "gb": 2**30, "tb": 2**40, "pb": 2**50,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_COUNTS = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


def parse_bytes(value: int | float | str | None) -> int | None:
    """`10_000`, `"10gb"` (10 x 1024**3), `"512MiB"` -> bytes; None stays None."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    return _parse(value, _BYTES, "a size", 'use bytes or a string like "10gb" (units of 1024)')


def parse_count(value: int | float | str | None) -> int | None:
    """`1000`, `"1.5k"`, `"1b"` (10**9) -> a number of samples; None stays None."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    return _parse(value, _COUNTS, "a sample count", 'use a number or one like "100k", "2.5m" or "1b" (10**9)')


def _parse(value: str, units: dict[str, int], what: str, hint: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
    if not m or m.group(2).lower() not in units:
        raise ConfigValueError(f"cannot read {value!r} as {what}", hint=hint)
    return int(float(m.group(1)) * units[m.group(2).lower()])
