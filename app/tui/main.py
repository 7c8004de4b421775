"""The `foundry-tui` entry point: `foundry-tui [--readonly] [--home DIR]`."""

from __future__ import annotations

import argparse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="foundry-tui", description="Foundry dashboard: runs, clusters, datasets, credentials.")
    parser.add_argument("--readonly", action="store_true", help="Disable every action that changes anything.")
    parser.add_argument("--home", default=None, help="FOUNDRY_HOME to use (default: $FOUNDRY_HOME or the user data dir).")
    parser.add_argument("--refresh", type=float, default=2.0, help="Seconds between background refreshes.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from foundry.app.control import ControlPlane
    from foundry.plugins.errors import FoundryError

    try:
        plane = ControlPlane(home=args.home)
    except FoundryError as exc:
        raise SystemExit(f"error: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else ""))
    from .app import FoundryApp

    FoundryApp(plane, readonly=args.readonly, refresh_interval=args.refresh).run()


if __name__ == "__main__":
    main()
