"""The plugin manager: built-in backends first, then the `foundry` entry-point group.

Built-ins are named by module (as pytest names its own), so this layer never imports the backends
statically. Environment, read when the manager is first built:
- FOUNDRY_LOAD_PLUGINS: comma-separated allowlist of entry-point or distribution names to load
  (empty string: load none); wins over the next one.
- FOUNDRY_DISABLE_PLUGIN_AUTOLOAD: any non-empty value skips entry-point discovery.
"""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from . import hookspecs
from .errors import ConfigError, PluginError

ENTRY_POINT_GROUP = "foundry"

# Built-in plugin modules, registered before any third-party plugin.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "foundry.backends.storage.plugin",
    "foundry.backends.compute.plugin",
    "foundry.backends.secrets.plugin",
    "foundry.backends.clouds.plugin",
)

_lock = threading.RLock()
_manager: pluggy.PluginManager | None = None
_registries: dict[str, "Registry"] = {}


@dataclass
class PluginInfo:
    name: str
    version: str | None
    hooks: list[str]
    builtin: bool
    contributes: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Registration:
    name: str
    value: Any
    plugin: str


class Registry:
    """Names contributed through one `register_<thing>` hook, attributed to their plugin."""

    def __init__(self, kind: str, hook_name: str, pm: pluggy.PluginManager):
        self.kind = kind
        self.items: dict[str, Registration] = {}
        # Built-ins were registered first; pluggy calls later-registered plugins first, so walk
        # the implementations in registration order to keep "first registered" attribution stable.
        for plugin_name in _implementers(pm, hook_name):

            def register(name: str, value: Any, _plugin: str = plugin_name) -> None:
                key = name.lower()
                if key in self.items:
                    other = self.items[key].plugin
                    raise PluginError(
                        f"{self.kind} {name!r} is registered by both {other!r} and {_plugin!r}",
                        hint=f"uninstall one of them, or set FOUNDRY_LOAD_PLUGINS to choose",
                    )
                self.items[key] = Registration(key, value, _plugin)

            _call_one(pm, hook_name, plugin_name, register=register)

    def get(self, name: str) -> Registration | None:
        return self.items.get(name.lower())

    def names(self) -> list[str]:
        return sorted(self.items)


def _implementers(pm: pluggy.PluginManager, hook_name: str) -> list[str]:
    """Names of the plugins implementing `hook_name`, in registration order."""
    return [impl.plugin_name for impl in reversed(getattr(pm.hook, hook_name).get_hookimpls())]


def _call_one(pm: pluggy.PluginManager, hook_name: str, plugin_name: str, **kwargs: Any) -> Any:
    """Call one plugin's implementation through pluggy (argument checks, wrappers and all), so the
    caller can attribute what it contributes and isolate its failures."""
    plugin = pm.get_plugin(plugin_name)
    others = [p for p in pm.get_plugins() if p is not plugin]
    return pm.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)


def _entry_points_to_load() -> list[metadata.EntryPoint]:
    eps = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    allow = os.environ.get("FOUNDRY_LOAD_PLUGINS")
    if allow is not None:
        wanted = {n.strip() for n in allow.split(",") if n.strip()}
        return [ep for ep in eps if ep.name in wanted or (ep.dist and ep.dist.name in wanted)]
    if os.environ.get("FOUNDRY_DISABLE_PLUGIN_AUTOLOAD"):
        return []
    return eps


def _build_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    for module_name in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(module_name), name=module_name)
    for ep in _entry_points_to_load():
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            raise PluginError(
                f"plugin {ep.name!r} ({ep.value}) failed to load: {exc}",
                hint="fix or uninstall it, or set FOUNDRY_DISABLE_PLUGIN_AUTOLOAD=1",
            ) from exc
        pm.register(plugin, name=ep.name)
        _dist_versions[ep.name] = ep.dist.version if ep.dist else None
    return pm


_dist_versions: dict[str, str | None] = {}


def get_plugin_manager() -> pluggy.PluginManager:
    global _manager
    with _lock:
        if _manager is None:
            _manager = _build_manager()
        return _manager


def reset_plugin_manager() -> None:
    """Forget the manager and registries (tests, or after installing a plugin in-process)."""
    global _manager
    with _lock:
        _manager = None
        _registries.clear()
        _dist_versions.clear()


def register_plugin(plugin: object, name: str | None = None) -> str:
    """Register an in-process plugin object (tests, notebooks); registries are rebuilt."""
    with _lock:
        registered = get_plugin_manager().register(plugin, name=name)
        _registries.clear()
        return registered


def unregister_plugin(name: str) -> None:
    with _lock:
        get_plugin_manager().unregister(name=name)
        _registries.clear()


def _registry(kind: str, hook_name: str) -> Registry:
    with _lock:
        if hook_name not in _registries:
            _registries[hook_name] = Registry(kind, hook_name, get_plugin_manager())
        return _registries[hook_name]


def storage_registry() -> Registry:
    return _registry("storage scheme", "register_storage")


def compute_registry() -> Registry:
    return _registry("compute provider", "register_compute")


def secret_type_registry() -> Registry:
    return _registry("secret type", "register_secret_types")


def open_store(url: str, options: dict[str, Any] | None = None):
    """Build the ObjectStore registered for `url`'s scheme, rooted at `url`."""
    from .storage import StorageURL

    parsed = StorageURL.parse(url)
    registration = storage_registry().get(parsed.scheme)
    if registration is None:
        schemes = ", ".join(storage_registry().names())
        raise ConfigError(
            f"unknown storage scheme {parsed.scheme!r} in {url!r}",
            hint=f"installed schemes: {schemes}; plugins add more (`foundry plugins`)",
        )
    if parsed.scheme == "file" and "://" not in url:
        url = parsed.join("")
    return registration.value.from_url(url, options or {})


def list_plugins() -> list[PluginInfo]:
    pm = get_plugin_manager()
    contributions: dict[str, dict[str, list[str]]] = {}
    for kind, registry in (
        ("storage", storage_registry()),
        ("compute", compute_registry()),
        ("secret_types", secret_type_registry()),
    ):
        for reg in registry.items.values():
            contributions.setdefault(reg.plugin, {}).setdefault(kind, []).append(reg.name)
    infos = []
    for name, plugin in pm.list_name_plugin():
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        builtin = name in BUILTIN_PLUGINS
        version = None if builtin else _dist_versions.get(name)
        if builtin:
            from foundry import __version__ as version  # type: ignore[no-redef]
        infos.append(
            PluginInfo(
                name=name,
                version=version,
                hooks=hooks,
                builtin=builtin,
                contributes={k: sorted(v) for k, v in contributions.get(name, {}).items()},
            )
        )
    return infos


def notify_run_event(run_name: str, event: str, details: dict | None = None) -> None:
    """Call every plugin's `on_run_event`; a failing observer is logged and skipped, never fatal."""
    import logging

    pm = get_plugin_manager()
    for plugin_name in _implementers(pm, "on_run_event"):
        try:
            _call_one(pm, "on_run_event", plugin_name, run_name=run_name, event=event, details=dict(details or {}))
        except Exception:  # noqa: BLE001 - observers must not break runs
            logging.getLogger("foundry.plugins").exception(
                "plugin %s failed in on_run_event(%s, %s)", plugin_name, run_name, event
            )
