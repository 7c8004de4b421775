"""Sample data shared by Foundry and the mosaicml-streaming peer (this file's text runs in both).

Only numpy and PIL: both environments have them. `normalize` turns decoded values into plain,
comparable, pickle-safe data (images become mode/size/pixels, numpy values dtype/shape/bytes).
"""

import decimal
import io

import numpy as np
from PIL import Image

MDS_COLUMNS = {
    "b": "bytes", "s": "str", "i": "int",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "f16": "float16", "f32": "float32", "f64": "float64",
    "si": "str_int", "sf": "str_float", "sd": "str_decimal",
    "pil": "pil", "jpeg": "jpeg", "png": "png",
    "lpil": "list[pil]", "ljpeg": "list[jpeg]", "lpng": "list[png]", "ja": "jpeg_array",
    "pkl": "pkl", "js": "json",
    "nd": "ndarray", "ndt": "ndarray:float32", "nds": "ndarray:int16:2,3",
}
# Encodings whose stored bytes do not depend on the image library's encoder.
DETERMINISTIC = [c for c, e in MDS_COLUMNS.items() if e not in ("jpeg", "png", "list[jpeg]", "list[png]", "ja")]
TEXT_COLUMNS = {"name": "str", "count": "int", "score": "float"}


def _image(rng, h, w):
    return Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8), "RGB")


def _jpeg_bytes(img):
    out = io.BytesIO()
    img.save(out, format="JPEG")
    return out.getvalue()


def make_samples(n, seed=0):
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(n):
        img = _image(rng, 4 + i % 3, 5)
        samples.append({
            "b": bytes(rng.integers(0, 255, i % 7, dtype=np.uint8)), "s": "héllo " * (i % 4), "i": i * 1_000_003 - 7,
            "u8": np.uint8(i % 256), "u16": np.uint16(i * 7), "u32": np.uint32(i * 70001), "u64": np.uint64(i << 40),
            "i8": np.int8(-(i % 100)), "i16": np.int16(-i * 3), "i32": np.int32(-i * 100003), "i64": np.int64(-(i << 35)),
            "f16": np.float16(i / 3), "f32": np.float32(i / 7), "f64": np.float64(i / 11),
            "si": i ** 5, "sf": i / 13, "sd": decimal.Decimal(f"{i}.{i:03d}"),
            "pil": img, "jpeg": img, "png": img,
            "lpil": [img] * (1 + i % 2), "ljpeg": [img], "lpng": [img, img],
            "ja": [_jpeg_bytes(img)] * (1 + i % 2),
            "pkl": {"k": [i, str(i)], "t": (i,)}, "js": {"a": i, "b": [1.5, None, "x"]},
            "nd": rng.integers(-50, 50, (1 + i % 3, 2), dtype=np.int64),
            "ndt": rng.random(1 + i % 4, dtype=np.float32), "nds": np.arange(6, dtype=np.int16).reshape(2, 3) * i,
        })
    return samples


def text_samples(n):
    return [{"name": f"row{i}", "count": i * 3, "score": i / 8} for i in range(n)]


def normalize(value):
    if isinstance(value, Image.Image):
        return ("image", value.mode, value.size, value.tobytes())
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [normalize(v) for v in value])
    return (type(value).__name__, value)
