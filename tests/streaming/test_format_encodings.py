"""Every MDS column encoding round-trips, with upstream's byte layouts and error cases."""

from __future__ import annotations

import io
import pickle
from decimal import Decimal

import numpy as np
import pytest
from PIL import Image

from foundry.plugins.errors import ConfigError, DataError
from foundry.streaming.format import decode, encode, encoding_names, get_encoding, register_encoding
from foundry.streaming.format.encodings import Encoding


def _img(mode="RGB", size=(5, 4)):
    rng = np.random.default_rng(0)
    channels = {"RGB": 3, "L": 1}[mode]
    arr = rng.integers(0, 255, (size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(arr[..., 0] if channels == 1 else arr, mode)


SCALARS = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


@pytest.mark.parametrize("name", SCALARS)
def test_numpy_scalars_round_trip_to_their_numpy_type(name):
    value = np.dtype(name).type(7)
    data = encode(name, value)
    assert len(data) == get_encoding(name).size == np.dtype(name).itemsize
    out = decode(name, data)
    assert type(out) is np.dtype(name).type and out == value


@pytest.mark.parametrize(
    "name,value",
    [
        ("int", -(1 << 62)), ("str", "héllo"), ("bytes", b"\x00\xff"), ("str_int", 10**30),
        ("str_float", 0.1), ("str_decimal", Decimal("3.14159265358979323846")),
        ("json", {"a": [1, None, "x"]}), ("pkl", {"t": (1, 2), "s": {3}}),
    ],
)
def test_plain_encodings_round_trip(name, value):
    assert decode(name, encode(name, value)) == value
    assert type(decode(name, encode(name, value))) is type(value)


def test_fixed_and_variable_sizes():
    assert get_encoding("int").size == 8
    assert get_encoding("str").size is None
    assert get_encoding("ndarray:int32:2,3").size == 24
    assert get_encoding("ndarray:int32").size is None and get_encoding("ndarray").size is None


def test_layouts_match_upstream():
    assert encode("int", 1) == (1).to_bytes(8, "little")
    assert encode("str_int", 42) == b"42"
    img = _img("L", (2, 1))
    assert encode("pil", img)[:13] == np.array([2, 1, 1], "<u4").tobytes() + b"L"
    # list[...]: reserved 0, count, sizes, payloads.
    raw = encode("list[pil]", [img])
    assert raw[:8] == np.array([0, 1], "<u4").tobytes()
    # ndarray without dtype/shape: dtype code, (ndim << 2 | width), dims, values.
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert encode("ndarray", arr) == bytes([17, (2 << 2) | 0, 2, 3]) + arr.tobytes()
    assert encode("ndarray:int16", arr) == bytes([(2 << 2) | 0, 2, 3]) + arr.tobytes()
    assert encode("ndarray:int16:2,3", arr) == arr.tobytes()
    big = np.zeros((1, 300), np.uint8)
    assert encode("ndarray:uint8", big)[:5] == bytes([(2 << 2) | 1]) + np.array([1, 300], "<u2").tobytes()


@pytest.mark.parametrize("encoding", ["ndarray", "ndarray:float64", "ndarray:float64:3,4"])
def test_ndarray_round_trips(encoding):
    arr = np.linspace(0, 1, 12).reshape(3, 4)
    out = decode(encoding, encode(encoding, arr))
    assert out.dtype == arr.dtype and out.shape == arr.shape and np.array_equal(out, arr)


def test_ndarray_every_dtype_and_wide_shapes():
    for dtype in ["uint8", "int8", "uint16", "int16", "float16", "uint32", "int32", "float32", "uint64", "int64", "float64"]:
        arr = np.ones((2, 70000), dtype)
        assert np.array_equal(decode("ndarray", encode("ndarray", arr)), arr)
    swapped = np.arange(4, dtype=">i4")
    assert decode("ndarray", encode("ndarray", swapped)).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "encoding,value",
    [("ndarray:int32:2", np.zeros(3, np.int32)), ("ndarray:int32", np.zeros(3, np.int64)),
     ("ndarray", np.zeros(0, np.int32)), ("ndarray", np.zeros(2, bool)), ("str", 5), ("int", 1 << 70)],
)
def test_bad_values_are_data_errors(encoding, value):
    with pytest.raises(DataError):
        encode(encoding, value)


def test_bytes_are_stored_as_is_whatever_the_encoding():
    assert encode("json", b"raw") == b"raw"
    assert encode("jpeg", b"\xff\xd8") == b"\xff\xd8"


def test_images_round_trip():
    img = _img()
    assert decode("pil", encode("pil", img)).tobytes() == img.tobytes()
    assert decode("png", encode("png", img)).tobytes() == img.tobytes()
    assert decode("jpeg", encode("jpeg", img)).size == img.size
    assert [i.tobytes() for i in decode("list[png]", encode("list[png]", [img, img]))] == [img.tobytes()] * 2
    assert [i.tobytes() for i in decode("list[pil]", encode("list[pil]", [img]))] == [img.tobytes()]
    assert len(decode("list[jpeg]", encode("list[jpeg]", [img, img, img]))) == 3
    buf = io.BytesIO()
    img.save(buf, format="JPEG")
    images = decode("jpeg_array", encode("jpeg_array", [buf.getvalue()] * 2))
    assert [i.size for i in images] == [img.size] * 2


def test_jpeg_of_a_jpeg_file_keeps_its_bytes(tmp_path):
    path = tmp_path / "a.jpg"
    _img().save(path, format="JPEG", quality=50)
    with Image.open(path) as img:
        assert encode("jpeg", img) == path.read_bytes()


def test_unknown_or_malformed_encodings_are_config_errors():
    for bad in ["nope", "ndarray:complex64", "ndarray:int32:0", "int:3", "ndarray:a:b:c"]:
        with pytest.raises(ConfigError):
            get_encoding(bad)


def test_registry_lists_every_documented_encoding_and_accepts_new_ones():
    names = set(encoding_names())
    assert {"bytes", "str", "int", "json", "pkl", "jpeg", "png", "pil", "list[pil]", "list[jpeg]", "list[png]",
            "jpeg_array", "ndarray", "str_int", "str_float", "str_decimal", *SCALARS} <= names

    class Upper(Encoding):
        def encode(self, obj):
            return obj.upper().encode()

        def decode(self, data):
            return bytes(data).decode()

    register_encoding("test_upper", lambda config: Upper())
    assert decode("test_upper", encode("test_upper", "abc")) == "ABC"


def test_pickle_is_flagged_unsafe():
    assert not get_encoding("pkl").safe
    assert all(get_encoding(n).safe for n in encoding_names() if n not in ("pkl", "test_upper"))
    assert pickle.loads(encode("pkl", [1])) == [1]


# A fresh interpreter (the built-ins must not be loaded yet) in which importing the image module
# takes a while, as it does on a cold disk; many threads then ask for an ndarray encoding at once.
_RACE = r"""
import importlib.abc, sys, threading, time

class SlowImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "foundry.streaming.format.encodings_image":
            time.sleep(0.3)
        return None

sys.meta_path.insert(0, SlowImage())
from foundry.streaming.format.encodings import get_encoding

barrier, failures = threading.Barrier(16), []

def ask():
    barrier.wait()
    try:
        get_encoding("ndarray:int64")
    except Exception as exc:
        failures.append(repr(exc))

threads = [threading.Thread(target=ask) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
print(len(failures), failures[:1])
"""


@pytest.mark.subprocess
def test_builtin_encodings_register_once_under_many_threads():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, check=True).stdout
    assert out.startswith("0 "), out
