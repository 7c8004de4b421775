"""MDS column encodings and their registry (names and bytes exactly as mosaicml-streaming's).

An Encoding turns one column value into bytes and back. `size` is the fixed payload size in bytes,
or None for variable-size columns. A value that is already `bytes` is stored as-is whatever the
encoding (upstream does the same). Image and ndarray encodings live in sibling modules and are
registered here by name. `pkl` is unsafe: readers refuse it unless the caller opts in.
"""

from __future__ import annotations

import json
import pickle
import struct
import threading
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from foundry.plugins.errors import ConfigError, DataError


class Encoding:
    """One column codec. Subclasses set `size` (None: variable) and implement encode/decode."""

    name: str = ""
    size: int | None = None
    safe: bool = True

    def encode(self, obj: Any) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def _type_error(self, obj: Any, expected: str) -> DataError:
        return DataError(f"encoding {self.name!r} expects {expected}, got {type(obj).__name__}")


class Bytes(Encoding):
    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise self._type_error(obj, "bytes")

    def decode(self, data: bytes) -> bytes:
        return bytes(data)


class Str(Encoding):
    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, str):
            raise self._type_error(obj, "str")
        return obj.encode("utf-8")

    def decode(self, data: bytes) -> str:
        return bytes(data).decode("utf-8")


class Int(Encoding):
    size = 8
    _struct = struct.Struct("<q")

    def encode(self, obj: Any) -> bytes:
        try:
            return self._struct.pack(obj)
        except struct.error:
            if not isinstance(obj, (int, np.integer)):
                raise self._type_error(obj, "int") from None
            raise DataError(f"int {obj} does not fit in int64") from None

    def decode(self, data: bytes) -> int:
        return self._struct.unpack_from(data)[0]


class Scalar(Encoding):
    """A numpy scalar of a fixed dtype; decodes to that numpy scalar type."""

    def __init__(self, dtype: str):
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.type = np.dtype(dtype).type
        self.size = self.dtype.itemsize

    def encode(self, obj: Any) -> bytes:
        return self.type(obj).tobytes()

    def decode(self, data: bytes) -> Any:
        return np.frombuffer(data, self.dtype, 1)[0]


class StrNumber(Encoding):
    """`str(value)` as UTF-8, parsed back with `parse` (str_int, str_float, str_decimal)."""

    def __init__(self, kind: type, parse: Callable[[str], Any]):
        self.kind = kind
        self.parse = parse

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, self.kind) or isinstance(obj, bool) and self.kind is int:
            raise self._type_error(obj, self.kind.__name__)
        return str(obj).encode("utf-8")

    def decode(self, data: bytes) -> Any:
        return self.parse(bytes(data).decode("utf-8"))


class JSON(Encoding):
    def encode(self, obj: Any) -> bytes:
        if isinstance(obj, np.ndarray):
            obj = obj.tolist()
        try:
            return json.dumps(obj).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise DataError(f"value is not JSON serializable: {exc}") from None

    def decode(self, data: bytes) -> Any:
        return json.loads(bytes(data).decode("utf-8"))


class Pickle(Encoding):
    safe = False

    def encode(self, obj: Any) -> bytes:
        return pickle.dumps(obj)

    def decode(self, data: bytes) -> Any:
        return pickle.loads(data)


_SCALARS = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
            "float16", "float32", "float64")

# name -> factory(config: str | None) -> Encoding. Parameterised names use `name:config`.
_REGISTRY: dict[str, Callable[[str | None], Encoding]] = {}


def register_encoding(name: str, factory: Callable[[str | None], Encoding]) -> None:
    """Add an encoding by name (the factory gets the text after `name:`, or None)."""
    _REGISTRY[name] = factory
    if "get_encoding" in globals():
        get_encoding.cache_clear()


def _plain(make: Callable[[], Encoding]) -> Callable[[str | None], Encoding]:
    def factory(config: str | None) -> Encoding:
        if config is not None:
            raise ValueError("takes no parameters")
        return make()

    return factory


for _name, _make in {
    "bytes": Bytes,
    "str": Str,
    "int": Int,
    "str_int": lambda: StrNumber(int, int),
    "str_float": lambda: StrNumber(float, float),
    "str_decimal": lambda: StrNumber(Decimal, Decimal),
    "json": JSON,
    "pkl": Pickle,
}.items():
    register_encoding(_name, _plain(_make))
for _name in _SCALARS:
    register_encoding(_name, _plain(lambda _n=_name: Scalar(_n)))


@lru_cache(maxsize=None)
def get_encoding(encoding: str) -> Encoding:
    """The codec for an encoding name like `str`, `ndarray:int32:2048`; ConfigError if unknown."""
    _load_builtin_modules()
    name, sep, config = encoding.partition(":")
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ConfigError(
            f"unknown column encoding {encoding!r}",
            hint=f"supported: {', '.join(encoding_names())}",
        )
    try:
        coder = factory(config if sep else None)
    except (ValueError, TypeError, AssertionError) as exc:
        raise ConfigError(f"invalid column encoding {encoding!r}: {exc}") from None
    coder.name = encoding
    return coder


def encoding_names() -> list[str]:
    _load_builtin_modules()
    return sorted(_REGISTRY)


def is_encoding(encoding: str) -> bool:
    try:
        get_encoding(encoding)
        return True
    except ConfigError:
        return False


def encode(encoding: str, obj: Any) -> bytes:
    if isinstance(obj, bytes):
        return obj
    return get_encoding(encoding).encode(obj)


def decode(encoding: str, data: bytes) -> Any:
    return get_encoding(encoding).decode(data)


# The image and ndarray encodings register themselves when their modules are first imported. The
# flag is set only after that import has finished, under a lock: a thread that saw it early would
# look up "ndarray" before it exists (`dataset verify` decodes in a thread pool).
_builtins_loaded = False
_builtins_lock = threading.RLock()  # re-entrant: a module being imported may ask for an encoding


def _load_builtin_modules() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    with _builtins_lock:
        if not _builtins_loaded:
            from . import encodings_image, encodings_ndarray  # noqa: F401  (they register themselves)

            _builtins_loaded = True
