"""Dataset widgets: decoded sample values as renderables (text, numbers, arrays, images as a
half-block preview) and the sample viewer."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Group, RenderableType
from rich.pretty import Pretty
from rich.style import Style
from rich.text import Text
from textual.widgets import Static


def image_preview(image, width: int = 32, max_rows: int = 12) -> Text:
    """An image as rows of '▀' (upper pixel = foreground, lower pixel = background)."""
    img = image.convert("RGB")
    img.thumbnail((width, max_rows * 2))
    w, h = img.size
    px = img.load()
    text = Text()
    for y in range(0, h, 2):
        for x in range(w):
            top = px[x, y]
            bottom = px[x, y + 1] if y + 1 < h else (0, 0, 0)
            text.append("▀", Style(color=f"rgb({top[0]},{top[1]},{top[2]})",
                                   bgcolor=f"rgb({bottom[0]},{bottom[1]},{bottom[2]})"))
        text.append("\n")
    return text


def _as_image(value: Any):
    try:
        from PIL import Image
    except ImportError:  # pillow is a dependency; stay safe without it
        return None
    if isinstance(value, Image.Image):
        return value
    if isinstance(value, (bytes, bytearray)) and len(value) > 8:
        try:
            img = Image.open(io.BytesIO(value))
            img.load()
            return img
        except Exception:
            return None
    return None


def short(value: Any, width: int = 24) -> str:
    """A one-cell summary of a value for the samples table."""
    if _as_image(value) is not None:
        img = _as_image(value)
        return f"<image {img.size[0]}x{img.size[1]} {img.mode}>"
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):
        return f"<array {'x'.join(map(str, shape)) or 'scalar'} {value.dtype}>"
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    text = str(value).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def render_value(value: Any) -> RenderableType:
    img = _as_image(value)
    if img is not None:
        return Group(Text(f"image {img.size[0]}x{img.size[1]} {img.mode}", style="dim"), image_preview(img))
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        import numpy as np

        body = np.array2string(value, threshold=64, edgeitems=3, precision=4)
        return Text(f"array shape={tuple(value.shape)} dtype={value.dtype}\n{body}")
    if isinstance(value, (bytes, bytearray)):
        return Text(f"{len(value)} bytes: {bytes(value[:48]).hex(' ')}{' …' if len(value) > 48 else ''}")
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, (dict, list, tuple)):
        return Pretty(value)
    return Text(repr(value.item() if hasattr(value, "item") else value))


class SampleView(Static):
    """One decoded sample: every column, rendered by its type."""

    def show(self, index: int, sample: dict[str, Any]) -> None:
        parts: list[RenderableType] = [Text(f"sample {index}", style="bold")]
        for key, value in sample.items():
            parts += [Text(key, style="bold cyan"), render_value(value)]
        self.update(Group(*parts))
