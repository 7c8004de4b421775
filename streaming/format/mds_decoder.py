"""Compile one MDS schema into a sample decoder: `decode(buf, begin) -> dict`.

The generated function reads the length header with one `struct.unpack_from`, then each column
straight from the shard buffer (an mmap): scalars with `unpack_from` (no slice), bytes and str as
one slice, ndarrays as views of the buffer (no copy), everything else through the column's codec. No per-column loop, no registry look-ups:
the per-sample cost is what the columns need and nothing more.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

import numpy as np

from .encodings import get_encoding

_STRUCT_CODES = {"uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q", "int8": "b", "int16": "h",
                 "int32": "i", "int64": "q", "float16": "e", "float32": "f", "float64": "d"}


def compile_sample_decoder(
    names: list[str], encodings: list[str], sizes: list[int | None]
) -> Callable[[Any, int], dict[str, Any]]:
    nvar = sum(1 for s in sizes if s is None)
    env: dict[str, Any] = {"np": np}
    lines = ["def decode(buf, begin):"]
    if nvar:
        env["_head"] = struct.Struct(f"<{nvar}I").unpack_from
        sizes_vars = ", ".join(f"s{k}" for k in range(nvar))
        lines.append(f"    {sizes_vars}, = _head(buf, begin)")
    lines.append(f"    p = begin + {4 * nvar}")
    items = []
    var = 0
    for k, (name, encoding, size) in enumerate(zip(names, encodings, sizes)):
        if size is None:
            length = f"s{var}"
            var += 1
        else:
            length = str(size)
        value = f"v{k}"
        if encoding == "bytes":
            lines.append(f"    {value} = buf[p:p + {length}]")
        elif encoding == "str":
            lines.append(f"    {value} = buf[p:p + {length}].decode('utf-8')")
        elif encoding == "int":
            env["_q"] = struct.Struct("<q").unpack_from
            lines.append(f"    {value}, = _q(buf, p)")
        elif encoding in _STRUCT_CODES:
            env[f"_u{k}"] = struct.Struct("<" + _STRUCT_CODES[encoding]).unpack_from
            env[f"_t{k}"] = np.dtype(encoding).type
            lines.append(f"    {value} = _t{k}(_u{k}(buf, p)[0])")
        elif getattr(codec := get_encoding(encoding), "count", None) is not None and codec.np_dtype is not None:
            # a fixed-shape ndarray: a read-only view of the mapped shard, no copy (collate copies once)
            env[f"_t{k}"], env[f"_n{k}"], env[f"_s{k}"] = codec.np_dtype, codec.count, codec.shape
            reshape = "" if len(codec.shape) == 1 else f".reshape(_s{k})"
            lines.append(f"    {value} = np.frombuffer(buf, _t{k}, _n{k}, p){reshape}")
        elif hasattr(codec, "np_dtype"):  # other ndarrays decode from a view too
            env[f"_d{k}"] = codec.decode
            lines.append(f"    {value} = _d{k}(memoryview(buf)[p:p + {length}])")
        else:
            env[f"_d{k}"] = codec.decode
            lines.append(f"    {value} = _d{k}(buf[p:p + {length}])")
        lines.append(f"    p += {length}")
        items.append(f"{name!r}: {value}")
    lines.append("    return {" + ", ".join(items) + "}")
    exec(compile("\n".join(lines), f"<mds decoder {','.join(encodings)}>", "exec"), env)  # noqa: S102
    return env["decode"]
