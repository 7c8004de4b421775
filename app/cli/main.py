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

from . import (checkpoint_cmds, cluster_cmds, dataset_cmds, dataset_registry_cmds, instance_cmds, plugins_cmd,
               run_cmds, secret_cmds, storage_cmds, verify_cmds)
from .output import sink

# The command modules, one per noun; each exposes `register(app)` and adds its commands (or its verbs'
# commands: groups.py) to the root app. Plain imports, so linters and import graphs see the whole CLI.
COMMAND_MODULES = (run_cmds, secret_cmds, cluster_cmds, dataset_registry_cmds, dataset_cmds, storage_cmds,
                   checkpoint_cmds, verify_cmds, instance_cmds)


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

    app.command("plugins")(plugins_cmd.plugins)
    for module in COMMAND_MODULES:
        module.register(app)

    from foundry.plugins.manager import get_plugin_manager

    get_plugin_manager().hook.register_commands(app=app)
    return app


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


if __name__ == "__main__":  # `foundry watch --daemon` starts `python -m foundry.app.cli.main watch`
    main()
