"""Secret verbs: `create secret KIND NAME --field ...` (one command per registered type), get, delete.

Values are never printed. Where a value comes from, most private first (scripts: the first two):
  --from-file PATH      the type's one secret value from a file (`-`: stdin), e.g. env secrets
  --FIELD -             that field from stdin (one field per command)
  (not given)           prompted for, hidden, at a terminal
  --FIELD VALUE         on the command line (visible in the process table and shell history)
mcli's forms work too: `create secret env NAME=VALUE [--name N]` and `create secret s3 --name N
--config-file ~/.aws/config --credentials-file ~/.aws/credentials [--profile P]`. Fields marked
from_file (keys, kubeconfigs) take a path and store the file's content.

Values already in the environment (s3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, S3_ENDPOINT_URL,
AWS_DEFAULT_REGION) are offered at a terminal, shown masked, taken when confirmed; `--from-env`
takes them as they are (scripts). Options given on the command line win over them.
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

from .groups import group
from .output import json_option, sink


def _cp():
    from foundry.app.control import ControlPlane

    return ControlPlane()


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


class _Stdin:
    """stdin, read at most once (one value per command can come from it)."""

    def __init__(self) -> None:
        self.taken_by: str | None = None

    def read(self, what: str) -> str:
        if self.taken_by is not None:
            raise ConfigError(f"{what} and {self.taken_by} both read stdin ('-')", hint="give one of them a file")
        self.taken_by = what
        return sys.stdin.read()


def _one_line_end(text: str) -> str:
    """A typed value from a file or stdin without the newline `echo` and editors add."""
    return text.removesuffix("\n").removesuffix("\r")


def _read_file(path_text: str, what: str, stdin: _Stdin) -> str:
    if path_text == "-":
        return stdin.read(what)
    path = Path(path_text).expanduser()
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{what} file {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {exc.strerror}") from None


def _main_field(stype: SecretType):
    """The type's one secret value typed as text (env: value), which --from-file fills; else None."""
    fields = [f for f in stype.fields if f.secret and not f.from_file]
    return fields[0] if len(fields) == 1 else None


def _read_field(stype: SecretType, field, given: str | None, stdin: _Stdin) -> str | None:
    if given is None:
        if not field.required:
            return None
        if field.secret and not field.from_file and sys.stdin.isatty():
            return typer.prompt(field.help, hide_input=True)
        hint = field.help + (f"; from a script: `{_opt(field.name)} -` reads stdin" if field.secret else "")
        from foundry.app.control import env_fields

        var = next((v for v, f in env_fields(stype).items() if f == field.name), None)
        if var:
            hint += f", or export {var} and give --from-env"
        raise ConfigError(f"secret type {stype.kind!r} needs {_opt(field.name)}", hint=hint)
    if field.from_file:
        return _read_file(given, _opt(field.name), stdin)
    if given == "-":
        return _one_line_end(stdin.read(_opt(field.name)))
    return given


def _name_and_values(stype: SecretType, kwargs: dict, stdin: _Stdin) -> tuple[str, dict[str, str]]:
    name, name_opt = kwargs.pop("name"), kwargs.pop("name_opt")
    given = {f.name: kwargs.get(f.name) for f in stype.fields}
    if stype.kind == "env" and name and "=" in name:          # mcli: `create secret env KEY=VALUE`
        key, _, value = name.partition("=")
        if given.get("key") is not None or given.get("value") is not None:
            raise ConfigError("give the variable as KEY=VALUE or with --key/--value, not both")
        given.update(key=key, value=value)
        name = None
        if name_opt is None:
            from foundry.app.names import to_name

            name_opt = to_name(key, fallback="env")
    if name and name_opt and name != name_opt:
        raise ConfigError(f"two names given ({name!r} and --name {name_opt!r})", hint="give one")
    name = name or name_opt
    if not name:
        raise ConfigError("the secret needs a name", hint=f"foundry create secret {stype.kind} NAME ... (or --name NAME)")
    from_file = kwargs.pop("from_file", None)
    main = _main_field(stype)
    if from_file is not None and main is not None:
        if given.get(main.name) is not None:
            raise ConfigError(f"give {_opt(main.name)} or --from-file, not both")
        given[main.name] = _one_line_end(_read_file(from_file, "--from-file", stdin))
    aws = {k: kwargs.pop(k, None) for k in ("config_file", "credentials_file", "profile")}
    if aws["config_file"] or aws["credentials_file"]:
        from foundry.app.control import s3_values_from_aws_files

        for field, value in s3_values_from_aws_files(aws["config_file"], aws["credentials_file"],
                                                      aws["profile"] or "default").items():
            given.setdefault(field, None)
            if given[field] is None:                          # explicit options win over the files
                given[field] = value
    _take_from_env(stype, given, kwargs.pop("from_env", False))
    values = {}
    for field in stype.fields:
        value = given.get(field.name)
        if not (from_file is not None and field is main):   # --from-file's value is read already
            value = _read_field(stype, field, value, stdin)
        if value is not None:
            values[field.name] = value
    return name, values


def _take_from_env(stype: SecretType, given: dict, flag: bool) -> None:
    """Fill the fields not given from the environment: with --from-env as they are, at a terminal
    once confirmed (shown masked); otherwise leave them (the error for a missing one says how)."""
    from foundry.app.control import env_offer

    offer = {f: pair for f, pair in env_offer(stype).items() if given.get(f) is None}
    if not offer or not (flag or sys.stdin.isatty()):
        return
    if not flag:
        sink.info("the environment holds:")
        for field, (var, value) in offer.items():
            secret = next((f.secret for f in stype.fields if f.name == field), True)
            sink.info(f"  {var:<24} -> {_opt(field)}: "
                      + (f"set, {len(value)} characters, hidden" if secret else value))
        if not typer.confirm("use these?", default=True):
            return
    for field, (_var, value) in offer.items():
        given[field] = value


def _create_command(stype: SecretType):
    def create(**kwargs) -> None:
        _json = kwargs.pop("json_out")
        sink.json_mode = sink.json_mode or _json
        name, values = _name_and_values(stype, kwargs, _Stdin())
        info = _cp().create_secret(name, stype.kind, values)
        if sink.json_mode:
            sink.emit(info.to_dict())
        else:
            sink.info(f"created {stype.kind} secret {name}")

    def option(name: str, flag: str, help_text: str, annotation=Optional[str]) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                 default=typer.Option(None, flag, help=help_text))

    name_help = "Secret name." + (" Or KEY=VALUE (mcli's form; the name is then --name, or the key)."
                                  if stype.kind == "env" else "")
    params = [inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                                default=typer.Argument(None, help=name_help, show_default=False)),
              option("name_opt", "--name", "Secret name (mcli's form).")]
    for field in stype.fields:
        help_text = field.help + (" (a path; - reads stdin)" if field.from_file else
                                  " (- reads stdin)" if field.secret else "") + ("" if field.required else " [optional]")
        params.append(option(field.name, _opt(field.name), help_text))
    main = _main_field(stype)
    if main is not None:
        params.append(option("from_file", "--from-file",
                             f"Read the {main.name} from this file (- reads stdin): the way to pass it from a script."))
    from foundry.app.control import env_fields

    variables = env_fields(stype)
    if variables:
        params.append(inspect.Parameter(
            "from_env", inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
                False, "--from-env", help=f"Take {', '.join(variables)} from the environment as they are "
                                          "(at a terminal they are offered, masked, to confirm).")))
    if stype.kind == "s3":
        params += [option("config_file", "--config-file", "AWS-style config file (region, endpoint_url)."),
                   option("credentials_file", "--credentials-file",
                          "AWS-style credentials file (aws_access_key_id, aws_secret_access_key)."),
                   option("profile", "--profile", "Profile in those files (default: the default profile).")]
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


def describe_secret(name: str = typer.Argument(..., help="Secret name."), json_out: bool = json_option()) -> None:
    """A secret: kind, fields (secret ones masked), and the variables a run that lists it gets."""
    sink.json_mode = sink.json_mode or json_out
    from foundry.app.control import env_fields
    from foundry.plugins.manager import secret_type_registry

    cp = _cp()
    info = next((i for i in cp.list_secrets() if i.name == name), None)
    if info is None:
        raise ConfigError(f"no secret named {name!r}", hint="`foundry get secrets` lists them")
    reg = secret_type_registry().get(info.kind)
    fields = {f: info.public.get(f, "*** (hidden)") for f in info.fields}
    variables = {}
    if reg is not None:
        by_field = {field: var for var, field in env_fields(reg.value).items()}
        for var in cp.secret_env_names(name):   # names only: values stay in the store
            field = next((f for f, v in by_field.items() if v == var), None)
            variables[var] = fields.get(field, "*** (hidden)") if field else "(set by the secret)"
    if sink.json_mode:
        sink.emit(dict(info.to_dict(), variables=sorted(variables)))
        return
    sink.emit({"name": info.name, "kind": info.kind,
               "created": datetime.fromtimestamp(info.created_at).strftime("%Y-%m-%d %H:%M"),
               **{f"field {k}": v for k, v in fields.items()}})
    if variables:
        sink.out.print()
        sink.emit([{"variable": k, "value": v} for k, v in variables.items()],
                  title=f"A run with `secrets: [{name}]` gets")


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
    group(app, "create").add_typer(secret_app, name="secret")
    group(app, "get").command("secrets")(get_secrets)
    group(app, "describe").command("secret")(describe_secret)
    group(app, "delete").command("secret")(delete_secret)
