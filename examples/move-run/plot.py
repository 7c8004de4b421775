"""The loss plot PNG, drawn by matplotlib (the optional extra `foundry-anywhere[plot]`, imported on use)."""

from __future__ import annotations

MISSING = "the loss plot needs matplotlib: pip install 'foundry-anywhere[plot]'"


class PlotExtraMissing(ImportError):
    """matplotlib is not installed; the message names the extra that brings it."""


def require_matplotlib():
    """matplotlib's pyplot on the file-only Agg backend, or PlotExtraMissing (one line naming the extra)."""
    try:
        import matplotlib
    except ImportError:
        raise PlotExtraMissing(MISSING) from None
    matplotlib.use("Agg")  # no display needed, never opens a window
    import matplotlib.pyplot as plt

    return plt


def line_plot(path: str, series: dict[str, list[tuple[float, float]]], title: str,
              vlines: dict[str, float] | None = None, size: tuple[int, int] = (800, 480)) -> None:
    """One line per series (x sorted), labelled vertical markers, written to `path` as a PNG of `size` pixels."""
    plt = require_matplotlib()
    dpi = 100
    fig, ax = plt.subplots(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    try:
        for i, (label, pts) in enumerate(series.items()):
            xs, ys = zip(*sorted(pts)) if pts else ((), ())
            ax.plot(xs, ys, label=label, linewidth=2 if i == 0 else 1)
        for label, x in (vlines or {}).items():
            ax.axvline(x, color="0.6", linewidth=1)
            ax.annotate(label, (x, 1), xycoords=("data", "axes fraction"), xytext=(4, -14),
                        textcoords="offset points", color="0.4")
        ax.set(title=title, xlabel="step", ylabel="loss")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=dpi)
    finally:
        plt.close(fig)
