"""Secret verbs: `create secret KIND NAME --field ...` (one command per registered type), get, delete.

Values are never printed. A secret field not given on the command line is prompted for (hidden)
at a terminal; fields marked from_file take a path and store the file's content.
"""

from __future__ import annotations

import inspect
import sys
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

from foundry.plugins.errors import ConfigError
from foundry.plugins.secrets import SecretType

from .output import sink
from .verbs import json_option, verb


def _cp():
    from foundry.app.control import ControlPlane

    return ControlPlane()


def _read_field(stype: SecretType, field, given: str | None) -> str | None:
    if given is None:
        if not field.required:
            return None
        if field.secret and not field.from_file and sys.stdin.isatty():
            return typer.prompt(field.help, hide_input=True)
        raise ConfigError(f"secret type {stype.kind!r} needs --{field.name.replace('_', '-')}",
                          hint=field.help)
    if field.from_file:
        path = Path(given).expanduser()
        try:
            return path.read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read --{field.name.replace('_', '-')} file {str(path)!r}: {exc.strerror}") from None
    return given


def _create_command(stype: SecretType):
    def create(**kwargs) -> None:
        _json = kwargs.pop("json_out")
        sink.json_mode = sink.json_mode or _json
        name = kwargs.pop("name")
        values = {}
        for field in stype.fields:
            value = _read_field(stype, field, kwargs.get(field.name))
            if value is not None:
                values[field.name] = value
        info = _cp().create_secret(name, stype.kind, values)
        if sink.json_mode:
            sink.emit(info.to_dict())
        else:
            sink.info(f"created {stype.kind} secret {name}")

    params = [inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, annotation=str,
                                default=typer.Argument(..., help="Secret name."))]
    for field in stype.fields:
        help_text = field.help + (" (a path)" if field.from_file else "") + (
            "" if field.required else " [optional]")
        params.append(inspect.Parameter(
            field.name, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
            default=typer.Option(None, "--" + field.name.replace("_", "-"), help=help_text)))
    params.append(inspect.Parameter("json_out", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                    default=json_option()))
    create.__signature__ = inspect.Signature(params)
    create.__doc__ = f"Create a {stype.kind} secret: {stype.description}."
    return create


def get_secrets(json_out: bool = json_option()) -> None:
    """List secrets: names, kinds, fields (never values)."""
    sink.json_mode = sink.json_mode or json_out
    infos = _cp().list_secrets()
    if sink.json_mode:
        sink.emit([i.to_dict() for i in infos])
        return
    sink.emit([{"name": i.name, "kind": i.kind, "fields": i.fields, "details": i.public or None,
                "created": datetime.fromtimestamp(i.created_at).strftime("%Y-%m-%d %H:%M")} for i in infos],
              columns=["name", "kind", "fields", "details", "created"])


def delete_secret(name: str = typer.Argument(..., help="Secret name.")) -> None:
    """Delete a secret."""
    _cp().delete_secret(name)
    sink.info(f"deleted secret {name}")


def register(app: typer.Typer) -> None:
    from foundry.plugins.manager import secret_type_registry

    secret_app = typer.Typer(help="Create a secret of one kind (s3 covers R2: give --endpoint).",
                             no_args_is_help=True)
    for reg in sorted(secret_type_registry().items.values(), key=lambda r: r.name):
        secret_app.command(reg.name, help=f"{reg.value.description}.")(_create_command(reg.value))
    verb(app, "create").add_typer(secret_app, name="secret")
    verb(app, "get").command("secrets")(get_secrets)
    verb(app, "delete").command("secret")(delete_secret)
