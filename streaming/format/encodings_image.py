"""Image encodings: `pil` (raw pixels), `jpeg`, `png`, `list[pil|jpeg|png]`, `jpeg_array`.

PIL is imported on first use, so datasets without images never pay for it.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

import numpy as np

from foundry.plugins.errors import DataError

from .encodings import Encoding, register_encoding

_U32 = struct.Struct("<I")
_PIL_HEAD = struct.Struct("<III")


def _image_module():
    from PIL import Image

    return Image


def _check_image(enc: Encoding, obj: Any) -> None:
    if not isinstance(obj, _image_module().Image):
        raise enc._type_error(obj, "a PIL image")


class PIL(Encoding):
    """uint32 width, uint32 height, uint32 len(mode), mode, raw `Image.tobytes()`."""

    def encode(self, obj: Any) -> bytes:
        _check_image(self, obj)
        mode = obj.mode.encode("utf-8")
        width, height = obj.size
        return _PIL_HEAD.pack(width, height, len(mode)) + mode + obj.tobytes()

    def decode(self, data: bytes) -> Any:
        width, height, mode_size = _PIL_HEAD.unpack_from(data)
        mode = bytes(data[12:12 + mode_size]).decode("utf-8")
        return _image_module().frombytes(mode, (width, height), bytes(data[12 + mode_size:]))


class JPEG(Encoding):
    def encode(self, obj: Any) -> bytes:
        _check_image(self, obj)
        from PIL.JpegImagePlugin import JpegImageFile

        filename = getattr(obj, "filename", None)
        if isinstance(obj, JpegImageFile) and filename:
            try:  # keep the original file's bytes, as upstream does
                with open(filename, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                pass
        out = BytesIO()
        obj.save(out, format="JPEG")
        return out.getvalue()

    def decode(self, data: bytes) -> Any:
        return _image_module().open(BytesIO(data))


class PNG(Encoding):
    def encode(self, obj: Any) -> bytes:
        _check_image(self, obj)
        out = BytesIO()
        obj.save(out, format="PNG")
        return out.getvalue()

    def decode(self, data: bytes) -> Any:
        return _image_module().open(BytesIO(data))


class ImageList(Encoding):
    """uint32 0 (reserved), uint32 count, count x uint32 sizes, then the element payloads."""

    def __init__(self, element: Encoding):
        self.element = element

    def encode(self, obj: Any) -> bytes:
        if not isinstance(obj, list):
            raise self._type_error(obj, "a list of PIL images")
        parts = [self.element.encode(x) for x in obj]
        sizes = np.array([len(p) for p in parts], np.uint32).tobytes()
        return b"".join([_U32.pack(0), _U32.pack(len(parts)), sizes, *parts])

    def decode(self, data: bytes) -> list:
        (count,) = _U32.unpack_from(data, 4)
        sizes = np.frombuffer(data, "<u4", count, 8).tolist()
        pos = 8 + 4 * count
        out = []
        for size in sizes:
            out.append(self.element.decode(data[pos:pos + size]))
            pos += size
        return out


class JPEGArray(Encoding):
    """uint32 count, count x uint32 sizes, then JPEG bytes; encodes a list of bytes."""

    def encode(self, obj: Any) -> bytes:
        parts = [bytes(x) for x in obj]
        sizes = np.array([len(p) for p in parts], np.uint32).tobytes()
        return b"".join([_U32.pack(len(parts)), sizes, *parts])

    def decode(self, data: bytes) -> list:
        if len(data) < 4:
            raise DataError("jpeg_array payload is too short")
        (count,) = _U32.unpack_from(data)
        if count <= 0 or len(data) < 4 + 4 * count:
            raise DataError("jpeg_array payload is malformed")
        sizes = np.frombuffer(data, "<u4", count, 4).tolist()
        pos = 4 + 4 * count
        images = []
        jpeg = JPEG()
        for size in sizes:
            images.append(jpeg.decode(data[pos:pos + size]))
            pos += size
        return images


def _plain(make):
    def factory(config):
        if config is not None:
            raise ValueError("takes no parameters")
        return make()

    return factory


register_encoding("pil", _plain(PIL))
register_encoding("jpeg", _plain(JPEG))
register_encoding("png", _plain(PNG))
register_encoding("list[pil]", _plain(lambda: ImageList(PIL())))
register_encoding("list[jpeg]", _plain(lambda: ImageList(JPEG())))
register_encoding("list[png]", _plain(lambda: ImageList(PNG())))
register_encoding("jpeg_array", _plain(JPEGArray))
register_encoding("jpegarray", _plain(JPEGArray))
