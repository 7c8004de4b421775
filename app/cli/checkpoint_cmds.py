"""`foundry checkpoint ls URL` and `foundry checkpoint inspect URL`: what a save folder holds and
what one checkpoint describes about itself, read with `--secret NAME` (a stored secret) where given.
The work is in the control plane (which reads foundry.trainer.checkpoint.catalog)."""

from __future__ import annotations

import typer

from .output import sink

_SECRET_HELP = "A stored secret to read the storage with (foundry get secrets)."


def _plane():
    from foundry.app.control import ControlPlane

    return ControlPlane()


checkpoint_app = typer.Typer(help="Inspect training checkpoints in any storage URL.", no_args_is_help=True)


@checkpoint_app.command("ls")
def ls(url: str = typer.Argument(..., help="A save folder: a path or s3://, gs://, file:// URL."),
       secret: str = typer.Option(None, "--secret", help=_SECRET_HELP)) -> None:
    """List the checkpoints of a save folder, oldest first (LATEST marks what a resume loads)."""
    rows = _plane().list_checkpoints(url, secret=secret)
    if not rows and not sink.json_mode:
        sink.info(f"no checkpoints in {url}")
        return
    sink.emit(rows, columns=["name", "epoch", "batch", "complete", "latest", "size", "files"])


@checkpoint_app.command("inspect")
def inspect(
    url: str = typer.Argument(..., help="A checkpoint folder, or a save folder (its latest checkpoint)."),
    verify: bool = typer.Option(False, "--verify", help="Download every file and check its sha256."),
    secret: str = typer.Option(None, "--secret", help=_SECRET_HELP),
) -> None:
    """Show what a checkpoint holds: run, timestamp, layout, world size, files, configuration."""
    info = _plane().describe_checkpoint(url, verify=verify, secret=secret)
    if sink.json_mode:
        sink.emit(info)
        return
    ts = info.pop("timestamp")
    files = info.pop("files")
    config = info.pop("config")
    info["timestamp"] = ", ".join(f"{k}={ts[k]}" for k in ("epoch", "batch", "sample", "token") if k in ts)
    info["files"] = ", ".join(f"{f['key']} ({f['size']} B)" for f in files)
    trainer = config.get("trainer", {}) if isinstance(config, dict) else {}
    info["max_duration"] = trainer.get("max_duration")
    info["model"] = (config.get("model") or {}).get("class") if isinstance(config, dict) else None
    sink.emit(info)


def register(app: typer.Typer) -> None:
    app.add_typer(checkpoint_app, name="checkpoint")
