"""Column encodings of the csv/tsv/xsv and json formats: `str`, `int`, `float` (text values)."""

from __future__ import annotations

from typing import Any, Callable

from foundry.plugins.errors import ConfigError, DataError

TEXT_ENCODINGS = ("str", "int", "float")
_TYPES = {"str": str, "int": int, "float": float}


def check_text_encoding(encoding: str) -> None:
    if encoding not in _TYPES:
        raise ConfigError(f"unknown text column encoding {encoding!r}", hint="use str, int or float")


def xsv_decoder(encoding: str) -> Callable[[str], Any]:
    check_text_encoding(encoding)
    return _TYPES[encoding]


def xsv_encode(encoding: str, value: Any, separator: str, newline: str) -> str:
    expected = _TYPES[encoding]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise DataError(f"text column {encoding!r} expects {expected.__name__}, got {type(value).__name__}")
    text = value if expected is str else str(value)
    if separator in text or newline in text:
        raise DataError(f"value {text[:40]!r} contains the separator or newline", hint="use the json or mds format")
    return text


def check_json_value(encoding: str, value: Any) -> None:
    expected = _TYPES[encoding]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise DataError(f"json column {encoding!r} expects {expected.__name__}, got {type(value).__name__}")
