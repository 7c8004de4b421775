"""`foundry verify-resume`: train the user's job straight and through stops, compare bit for bit.
The work is in foundry.app.control.verify (which starts the training as its own processes:
this process never imports torch)."""

from __future__ import annotations

from typing import List, Optional

import typer

from .output import json_option, sink


def verify_resume(
    command: Optional[List[str]] = typer.Argument(None, help="The training command, after --: any script that "
                                                             "trains with foundry.trainer, unchanged."),
    file: Optional[str] = typer.Option(None, "-f", "--file", help="A run spec (run.yaml): its command and env."),
    steps: int = typer.Option(20, "--steps", help="Batches to train (the same for every run)."),
    stops: int = typer.Option(2, "--stops", help="Stops in the stopped run: SIGTERM and kill -9, alternating."),
    world_sizes: Optional[str] = typer.Option(None, "--world-sizes",
                                              help="Process counts to check, e.g. 2,1 (default: the spec's gpus, or 1)."),
    timeout: float = typer.Option(1800.0, "--timeout", help="Seconds one training process may take."),
    work_dir: Optional[str] = typer.Option(None, "--work-dir", help="Keep checkpoints, probe rows and logs here."),
    json_out: bool = json_option(),
) -> None:
    """Check that your training resumes exactly: run it straight and stopped, compare losses and parameters.

    foundry verify-resume -- python train.py --data file://data   (exit 0: identical; 1: it differs)
    """
    from foundry.app.control import verify_resume as run

    sink.json_mode = sink.json_mode or json_out
    progress = (lambda line: None) if sink.json_mode else (lambda line: sink.info(f"verify-resume: {line}"))
    outcome = run(command, file, steps=steps, stops=stops, world_sizes=world_sizes, work_dir=work_dir,
                  timeout=timeout, progress=progress)
    if sink.json_mode:
        sink.emit(outcome.to_dict())
    else:
        sink.lines(outcome.lines())
    if not outcome.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("verify-resume", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(
        verify_resume)
