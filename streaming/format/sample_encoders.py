"""Compiled per-writer sample encoders: sample dict -> stored bytes, for mds, json and csv/tsv/xsv.

Each writer builds its encoder once from its columns, so the per-sample path is a loop over
prebound functions: no registry look-ups, no numpy temporaries for the length header.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Callable

from foundry.plugins.errors import ConfigError, DataError

from .encodings import get_encoding
from .xsv import check_json_value, check_text_encoding, xsv_encode

SampleEncoder = Callable[[dict[str, Any]], bytes]


def _missing(name: str) -> DataError:
    return DataError(f"sample has no column {name!r}")


def mds_columns(columns: dict[str, str]) -> tuple[list[str], list[str], list[int | None]]:
    """Sorted column names, their encodings and fixed sizes (None: variable)."""
    if not columns:
        raise ConfigError("a dataset needs at least one column")
    names = sorted(columns)
    encodings = [columns[n] for n in names]
    sizes = [get_encoding(e).size for e in encodings]
    return names, encodings, sizes


def mds_sample_encoder(columns: dict[str, str]) -> SampleEncoder:
    names, encodings, sizes = mds_columns(columns)
    cols = [(n, get_encoding(e).encode, s, e) for n, e, s in zip(names, encodings, sizes)]
    nvar = sum(1 for s in sizes if s is None)
    head = struct.Struct(f"<{nvar}I").pack

    def check(name: str, encoding: str, size: int, got: int) -> DataError:
        return DataError(
            f"column {name!r} ({encoding}) must encode to {size} bytes, got {got}",
            hint="check the value's dtype and shape against the column encoding",
        )

    if nvar == 0 and len(cols) == 1:  # one fixed column (e.g. a token array): no join, no copy
        (name, fn, size, encoding), = cols

        def encode_one(sample: dict[str, Any]) -> bytes:
            try:
                value = sample[name]
            except KeyError:
                raise _missing(name) from None
            data = value if type(value) is bytes else fn(value)
            if len(data) != size:
                raise check(name, encoding, size, len(data))
            return data

        return encode_one

    def encode(sample: dict[str, Any]) -> bytes:
        parts: list[bytes] = [b""]
        lengths = []
        try:
            for name, fn, size, encoding in cols:
                value = sample[name]
                data = value if type(value) is bytes else fn(value)
                if size is None:
                    lengths.append(len(data))
                elif len(data) != size:
                    raise check(name, encoding, size, len(data))
                parts.append(data)
        except KeyError:
            raise _missing(name) from None
        if nvar:
            parts[0] = head(*lengths)
        return b"".join(parts)

    return encode


def json_sample_encoder(columns: dict[str, str], newline: str) -> SampleEncoder:
    for encoding in columns.values():
        check_text_encoding(encoding)
    items = list(columns.items())

    def encode(sample: dict[str, Any]) -> bytes:
        obj = {}
        for name, encoding in items:
            if name not in sample:
                raise _missing(name)
            check_json_value(encoding, sample[name])
            obj[name] = sample[name]
        return (json.dumps(obj, sort_keys=True) + newline).encode("utf-8")

    return encode


def xsv_sample_encoder(columns: dict[str, str], separator: str, newline: str) -> SampleEncoder:
    names = sorted(columns)
    for name in names:
        check_text_encoding(columns[name])
        if separator in name or newline in name:
            raise ConfigError(f"column name {name!r} contains the separator or newline")
    cols = [(n, columns[n]) for n in names]

    def encode(sample: dict[str, Any]) -> bytes:
        try:
            values = [xsv_encode(enc, sample[name], separator, newline) for name, enc in cols]
        except KeyError as exc:
            raise _missing(exc.args[0]) from None
        return (separator.join(values) + newline).encode("utf-8")

    return encode
