"""Loggers: metrics as JSON lines in the run directory (read by the CLI and the TUI), a console
display (rich progress on a terminal, plain lines otherwise), and TensorBoard / MLflow / W&B when
their packages are installed. Only rank 0 logs.

metrics.jsonl rows: {"step", "epoch", "loss", "lr", "throughput" (batches/s), "samples_per_sec",
"tokens_per_sec", "wall_time", "time"}; evaluation rows carry "eval/loss" instead of "loss".
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from .progress_lines import TimedProgressLines


class Logger:
    def log_metrics(self, metrics: dict[str, Any], step: int) -> None: ...
    def close(self) -> None: ...


class JSONLinesLogger(Logger):
    flush_seconds = 1.0

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a")
        self._flushed = 0.0

    def log_metrics(self, metrics: dict[str, Any], step: int) -> None:
        now = time.time()
        row = {"step": step, **metrics, "time": round(now, 3)}
        self._file.write(json.dumps(row, allow_nan=True) + "\n")
        if now - self._flushed >= self.flush_seconds:  # readers see rows within a second
            self._file.flush()
            self._flushed = now

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _format(metrics: dict[str, Any]) -> str:
    parts = []
    for key in ("loss", "eval/loss", "lr", "samples_per_sec", "tokens_per_sec"):
        if key in metrics and metrics[key] is not None:
            v = metrics[key]
            parts.append(f"{key}={v:.4g}" if isinstance(v, float) else f"{key}={v}")
    return " ".join(parts)


class ConsoleLogger(Logger):
    """A rich progress bar when stderr is a terminal, else plain lines by time (progress_lines.py:
    the first step, every `seconds`, evaluations, the last step; with the ETA)."""

    def __init__(self, total_batches: int | None, interval: int = 10, rich: bool | None = None, stream=None,
                 seconds: float = 10.0):
        self.stream = stream or sys.stderr
        self.interval = max(1, interval)
        self.total = total_batches
        self.use_rich = self.stream.isatty() if rich is None else rich
        self._lines = TimedProgressLines(self.stream, total_batches, _format, seconds)
        self._progress = None
        if self.use_rich:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
            from rich.console import Console

            self._progress = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(),
                                      TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                                      console=Console(file=self.stream), transient=False)
            self._task = self._progress.add_task("train", total=total_batches, info="")
            self._progress.start()

    def set_time_budget(self, seconds: float) -> None:
        """Training stops `seconds` from now at the latest: the plain lines' ETA never says more."""
        self._lines.set_time_budget(seconds)

    def log_metrics(self, metrics: dict[str, Any], step: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=step, info=_format(metrics))
            if "eval/loss" in metrics:
                self._progress.console.print(f"step {step}: {_format(metrics)}")
            return
        self._lines.log(metrics, step)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


class TensorBoardLogger(Logger):
    def __init__(self, log_dir: str | Path):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(log_dir))

    def log_metrics(self, metrics: dict[str, Any], step: int) -> None:
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                self.writer.add_scalar(k, v, step)

    def close(self) -> None:
        self.writer.close()


class MLflowLogger(Logger):
    def __init__(self, run_name: str):
        import mlflow

        self.mlflow = mlflow
        mlflow.start_run(run_name=run_name)

    def log_metrics(self, metrics: dict[str, Any], step: int) -> None:
        self.mlflow.log_metrics({k.replace("/", "_"): v for k, v in metrics.items()
                                 if isinstance(v, (int, float))}, step=step)

    def close(self) -> None:
        self.mlflow.end_run()


class WandBLogger(Logger):
    def __init__(self, run_name: str):
        import wandb

        self.run = wandb.init(name=run_name)

    def log_metrics(self, metrics: dict[str, Any], step: int) -> None:
        self.run.log(metrics, step=step)

    def close(self) -> None:
        self.run.finish()


_OPTIONAL = {"tensorboard": ("tensorboard", TensorBoardLogger), "mlflow": ("mlflow", MLflowLogger),
             "wandb": ("wandb", WandBLogger)}


def build_logger(spec: Any, run_name: str, run_dir: Path) -> Logger | None:
    """A Logger instance passes through; 'tensorboard' / 'mlflow' / 'wandb' are built if installed."""
    if not isinstance(spec, str):
        return spec
    if spec not in _OPTIONAL:
        from foundry.plugins.errors import ConfigError

        raise ConfigError(f"unknown logger {spec!r}", hint="use tensorboard, mlflow, wandb or a Logger object")
    module, cls = _OPTIONAL[spec]
    if importlib.util.find_spec(module) is None:
        warnings.warn(f"logger {spec!r} skipped: the {module!r} package is not installed", stacklevel=2)
        return None
    return cls(run_dir / "tensorboard") if spec == "tensorboard" else cls(run_name)
