"""The `foundry` command: one Typer sub-app per noun, assembled here; plugins add their own.

Errors: a FoundryError prints one line (and its hint) to stderr and exits with its exit code;
FOUNDRY_DEBUG=1 shows the traceback.
"""

from __future__ import annotations

import os
import sys

import typer

from foundry import __version__
from foundry.plugins.errors import FoundryError

from .output import sink


def _version(value: bool) -> None:
    if value:
        print(f"foundry {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="foundry",
        help="Train models on any compute, anywhere: runs, clusters, secrets, datasets, storage.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def root(
        json_out: bool = typer.Option(False, "--json", help="Print data as JSON (every data command)."),
        version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    ) -> None:
        sink.json_mode = json_out

    from . import plugins_cmd

    app.command("plugins")(plugins_cmd.plugins)
    for register in _command_modules():
        register(app)

    from foundry.plugins.manager import get_plugin_manager

    get_plugin_manager().hook.register_commands(app=app)
    return app


def _command_modules():
    """Each command module exposes `register(app)`; modules appear as their issues land."""
    import importlib

    for name in COMMAND_MODULES:
        yield importlib.import_module(f"foundry.app.cli.{name}").register


# Command modules of the CLI, one per noun (each exposes `register(app)`).
COMMAND_MODULES: list[str] = ["run_cmds", "secret_cmds", "cluster_cmds", "dataset_registry_cmds", "dataset_cmds", "storage_cmds", "checkpoint_cmds"]


def report_error(exc: FoundryError) -> int:
    message = f"error: {exc.message}"
    if exc.hint:
        message += f"\n  hint: {exc.hint}"
    print(message, file=sys.stderr)
    return exc.exit_code


def main(argv: list[str] | None = None) -> None:
    debug = bool(os.environ.get("FOUNDRY_DEBUG"))
    try:
        app = build_app()
        # In non-standalone mode click returns a command's exit code instead of raising.
        rc = app(args=argv, standalone_mode=False)
        if isinstance(rc, int) and rc != 0:
            sys.exit(rc)
    except FoundryError as exc:
        if debug:
            raise
        sys.exit(report_error(exc))
    except (typer.Abort, KeyboardInterrupt):
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors and the unexpected
        # Usage errors from (typer's) click: print click's message, exit with its code (2).
        if hasattr(exc, "show") and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()
            sys.exit(exc.exit_code)
        if debug:
            raise
        print(f"error: {type(exc).__name__}: {exc}\n  hint: rerun with FOUNDRY_DEBUG=1 for the traceback", file=sys.stderr)
        sys.exit(1)
