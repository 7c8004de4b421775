"""Read a run spec (YAML file or dict), accept mcli's older form, and explain every error precisely.

Errors are ConfigError with the file, the key path, what is wrong and what is allowed, e.g.
`run.yaml: compute.gpus: must be >= 0 (got -1)`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from foundry.plugins.errors import ConfigError

from .schema import RunSpec
from .variables import expand_variables
from .yaml_limits import safe_load_limited

# A run spec is a page of YAML; past this it is data that belongs in a file or a bucket. Refused by
# size at once: parsing a few megabytes of YAML takes seconds (minutes without libyaml).
SPEC_MAX_BYTES = 1024 * 1024

# mcli's older top-level form -> where the key lives in the modern form.
LEGACY_KEYS = {"run_name": ("name",), "gpu_num": ("compute", "gpus"),
               "gpu_type": ("compute", "gpu_type"), "cluster": ("compute", "cluster")}
# mcli keys accepted and ignored (they mean nothing to Foundry).
IGNORED_KEYS = {"optimization_level", "metadata"}


def normalize_legacy(data: dict[str, Any], source: str = "<spec>") -> dict[str, Any]:
    """Rewrite mcli's older keys (run_name, gpu_num, gpu_type, cluster) into the modern form."""
    data = dict(data)
    for key in IGNORED_KEYS & set(data):
        data.pop(key)
    for old, path in LEGACY_KEYS.items():
        if old not in data:
            continue
        value = data.pop(old)
        if len(path) == 1:
            if path[0] in data:
                raise ConfigError(f"{source}: both `{old}` and `{path[0]}` are set", hint=f"keep one (`{path[0]}` is the newer form)")
            data[path[0]] = value
        else:
            compute = data.setdefault("compute", {})
            if not isinstance(compute, dict):
                raise ConfigError(f"{source}: compute: must be a mapping (got {type(compute).__name__})")
            if path[1] in compute:
                raise ConfigError(f"{source}: both `{old}` and `compute.{path[1]}` are set", hint="keep one")
            compute[path[1]] = value
    return data


def _allowed_keys(model: type[BaseModel] | None) -> str:
    return ", ".join(model.model_fields) if model else ""


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` (for 'allowed keys' hints)."""
    from . import schema

    model: Any = RunSpec
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue
        if part in ("git_repo", "pip_packages"):
            model = schema.GitRepo if part == "git_repo" else schema.PipPackages
            continue
        fld = getattr(model, "model_fields", {}).get(part)
        ann = getattr(fld, "annotation", None)
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return model


def _format(err: dict[str, Any]) -> str:
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in loc if p not in ("git_repo", "pip_packages")) or "(top level)"
    kind = err["type"]
    got = err.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(_model_at(loc))
        return f"{path}: unknown key; allowed here: {allowed}"
    if kind == "missing" and loc == ("name",):
        return "name: required key is missing (add `name: ...` to the spec, or give --name)"
    if kind == "missing":
        return f"{path}: required key is missing"
    if kind == "union_tag_invalid":
        return f"{path}: unknown integration_type {err['ctx'].get('tag')!r}; allowed: git_repo, pip_packages"
    if kind == "union_tag_not_found":
        return f"{path}: integration_type is missing; allowed: git_repo, pip_packages"
    msg = err["msg"].removeprefix("Value error, ")
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        msg = msg.replace("Input should be", "must be")
    if kind == "literal_error":
        msg = msg.replace("Input should be", "allowed:")
    if not isinstance(got, (dict, list)) and kind not in ("value_error",) and got is not None:
        msg += f" (got {got!r})"
    return f"{path}: {msg}"


def parse_spec(data: Any, source: str = "<spec>") -> RunSpec:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a run spec must be a mapping of keys (got {type(data).__name__})")
    data = normalize_legacy(data, source)
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        lines = [_format(e) for e in errors]
        first = f"{source}: {lines[0]}"
        more = f" (and {len(lines) - 1} more: " + "; ".join(lines[1:]) + ")" if len(lines) > 1 else ""
        raise ConfigError(first + more, hint="see docs/sdk.md for the run spec keys") from None


def load_spec(path: str | Path, name: str | None = None) -> RunSpec:
    """The run spec in the YAML file at `path`; `name` (`--name`) is the run's name when the file
    gives none (a name in the file is replaced later, by apply_overrides)."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > SPEC_MAX_BYTES:   # said with the file's own size (a pipe reports 0: read below)
                raise ConfigError(f"{path.name}: {size:,} bytes is too large for a Foundry YAML file "
                                  f"(limit {SPEC_MAX_BYTES:,})",
                                  hint="keep large data in a file or a bucket the job reads, not in the YAML")
            raw = fh.read(SPEC_MAX_BYTES + 1)   # never more than the limit, whatever the file's size
    except FileNotFoundError:
        raise ConfigError(f"run spec {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"run spec {str(path)!r} is a folder", hint="give the YAML file's path") from None
    except OSError as exc:
        raise ConfigError(f"cannot read run spec {str(path)!r}: {exc.strerror}") from None
    data = expand_variables(safe_load_limited(raw, path.name, SPEC_MAX_BYTES), path.name)
    if name is not None and isinstance(data, dict) and "name" not in data and "run_name" not in data:
        data["name"] = name
    return parse_spec(data, path.name)


def apply_overrides(spec: RunSpec, *, name: str | None = None, cluster: str | None = None,
                    gpus: int | None = None, nodes: int | None = None) -> RunSpec:
    """CLI overrides (--name --cluster --gpus --nodes), re-validated as a whole."""
    data = spec.to_dict()
    if name is not None:
        data["name"] = name
    compute = data.setdefault("compute", {})
    for key, value in (("cluster", cluster), ("gpus", gpus), ("nodes", nodes)):
        if value is not None:
            compute[key] = value
    return parse_spec(data, "command-line overrides")
