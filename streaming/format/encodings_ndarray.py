"""`ndarray`, `ndarray:DTYPE`, `ndarray:DTYPE:D0,D1,...`: numpy arrays, fixed-size iff dtype+shape.

Payload: [dtype code byte, if dtype not fixed][shape header, if shape not fixed][values, C order].
Shape header: one byte `(ndim << 2) | w` (w: 0=u8, 1=u16, 2=u32, 3=u64), then ndim dims of that width.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

import numpy as np

from foundry.plugins.errors import DataError

from .encodings import Encoding, register_encoding

CODE_TO_DTYPE = {8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 18: "float16", 32: "uint32",
                 33: "int32", 34: "float32", 64: "uint64", 65: "int64", 66: "float64"}
DTYPE_TO_CODE = {v: k for k, v in CODE_TO_DTYPE.items()}
_WIDTHS = {0: "<u1", 1: "<u2", 2: "<u4", 3: "<u8"}
# Looked up by dtype object: `dtype.name` costs microseconds per call.
_CODE_BY_DTYPE = {np.dtype(name).newbyteorder("<"): code for code, name in CODE_TO_DTYPE.items()}
_CODE_BYTES = {code: bytes([code]) for code in CODE_TO_DTYPE}


_DTYPE_BY_CODE = {code: np.dtype(name) for code, name in CODE_TO_DTYPE.items()}


@lru_cache(maxsize=None)
def _dims_struct(ndim: int, width: int) -> struct.Struct:
    return struct.Struct(f"<{ndim}{'BHIQ'[width]}")


@lru_cache(maxsize=None)
def _shape_struct(ndim: int, width: int) -> struct.Struct:
    return struct.Struct(f"<B{ndim}{'BHIQ'[width]}")


class NDArray(Encoding):
    def __init__(self, dtype: str | None = None, shape: tuple[int, ...] | None = None):
        if dtype is not None and dtype not in DTYPE_TO_CODE:
            raise ValueError(f"unsupported dtype {dtype!r}")
        if shape is not None and (not shape or any(d < 1 for d in shape)):
            raise ValueError("every dimension must be at least 1")
        self.dtype = dtype
        self.np_dtype = np.dtype(dtype) if dtype else None
        self.shape = shape
        self.count = int(np.prod(shape)) if shape else None
        self.size = self.count * self.np_dtype.itemsize if dtype and shape else None

    @classmethod
    def from_config(cls, config: str | None) -> "NDArray":
        if not config:
            return cls()
        args = config.split(":")
        if len(args) > 2:
            raise ValueError("expected ndarray[:DTYPE[:D0,D1,...]]")
        shape = tuple(int(d) for d in args[1].split(",")) if len(args) == 2 else None
        return cls(args[0], shape)

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, np.ndarray):
            raise self._type_error(obj, "a numpy array")
        if self.size is not None and obj.dtype == self.np_dtype and obj.shape == self.shape:
            return obj.tobytes()  # the common fixed-size case, without the checks below
        code = _CODE_BY_DTYPE.get(obj.dtype)
        if code is None:
            name = obj.dtype.name
            if name not in DTYPE_TO_CODE:
                raise DataError(f"unsupported ndarray dtype {name}")
            obj = obj.astype(obj.dtype.newbyteorder("<"))  # stored little-endian
            code = DTYPE_TO_CODE[name]
        parts = []
        if self.dtype is None:
            parts.append(_CODE_BYTES[code])
        elif code != DTYPE_TO_CODE[self.dtype]:
            raise DataError(f"wrong dtype for {self.name!r}: got {obj.dtype.name}")
        if obj.size == 0:
            raise DataError("cannot encode an ndarray with no elements")
        if self.shape is None:
            ndim = obj.ndim
            if ndim == 0:
                raise DataError("cannot encode a 0-d array as ndarray; use a scalar encoding")
            if ndim >= 64:
                raise DataError(f"ndarray has too many axes ({ndim}, at most 63)")
            biggest = max(obj.shape)
            width = 0 if biggest < 1 << 8 else 1 if biggest < 1 << 16 else 2 if biggest < 1 << 32 else 3
            parts.append(_shape_struct(ndim, width).pack((ndim << 2) | width, *obj.shape))
        elif obj.shape != self.shape:
            raise DataError(f"wrong shape for {self.name!r}: expected {self.shape}, got {obj.shape}")
        parts.append(obj.tobytes())
        return b"".join(parts)

    def decode(self, data: bytes) -> np.ndarray:
        if self.np_dtype is not None:
            dtype, pos = self.np_dtype, 0
        else:
            dtype, pos = _DTYPE_BY_CODE[data[0]], 1
        if self.shape is not None:
            arr = np.frombuffer(data, dtype, self.count, pos)
            return arr if len(self.shape) == 1 else arr.reshape(self.shape)
        head = data[pos]
        ndim, width = head >> 2, head & 3
        shape = _dims_struct(ndim, width).unpack_from(data, pos + 1)
        arr = np.frombuffer(data, dtype, -1, pos + 1 + ndim * (1 << width))
        return arr if ndim == 1 else arr.reshape(shape)


register_encoding("ndarray", NDArray.from_config)
