"""A small line-plot PNG writer on Pillow (matplotlib is not a dependency)."""

from __future__ import annotations

from PIL import Image, ImageDraw

COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40)]


def line_plot(path: str, series: dict[str, list[tuple[float, float]]], title: str,
              vlines: dict[str, float] | None = None, size: tuple[int, int] = (800, 480)) -> None:
    width, height = size
    left, right, top, bottom = 70, 20, 40, 50
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    points = [p for pts in series.values() for p in pts]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad

    def px(x: float, y: float) -> tuple[float, float]:
        return (left + (x - x0) / (x1 - x0) * (width - left - right),
                height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom))

    draw.rectangle([left, top, width - right, height - bottom], outline=(0, 0, 0))
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        _, yp = px(x0, yv)
        draw.line([left - 4, yp, left, yp], fill=(0, 0, 0))
        draw.text((5, yp - 6), f"{yv:.3f}", fill=(0, 0, 0))
        xv = x0 + (x1 - x0) * i / 4
        xp, _ = px(xv, y0)
        draw.line([xp, height - bottom, xp, height - bottom + 4], fill=(0, 0, 0))
        draw.text((xp - 8, height - bottom + 8), f"{xv:.0f}", fill=(0, 0, 0))
    for label, x in (vlines or {}).items():
        xp, _ = px(x, y0)
        draw.line([xp, top, xp, height - bottom], fill=(150, 150, 150), width=1)
        draw.text((xp + 4, top + 4), label, fill=(100, 100, 100))
    for i, (label, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        draw.line([px(x, y) for x, y in sorted(pts)], fill=color, width=2 if i == 0 else 1)
        draw.text((width - right - 220, top + 8 + 14 * i), f"— {label}", fill=color)
    draw.text((left, 12), title, fill=(0, 0, 0))
    draw.text((width // 2 - 10, height - 20), "step", fill=(0, 0, 0))
    img.save(path, "PNG")
