"""Every hookspec is documented (one section in docs/plugins.md) and tested (a test_hook_<name> here)."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

from foundry.plugins import hookspecs
from foundry.plugins.compute import Capabilities
from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.manager import (
    compute_registry,
    notify_run_event,
    register_plugin,
    secret_type_registry,
    storage_registry,
    unregister_plugin,
)
from foundry.plugins.secrets import SecretField, SecretInjection, SecretType

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
HOOKS = sorted(
    name
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
    if hasattr(fn, "foundry_spec")
)


def test_hookspecs_are_found():
    assert {"register_storage", "register_compute", "register_secret_types", "register_commands", "on_run_event"} <= set(HOOKS)


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hookspec_has_a_docstring_and_a_docs_section(hook):
    assert (getattr(hookspecs, hook).__doc__ or "").strip(), f"{hook} has no docstring"
    sections = re.findall(r"^## (\w+)\s*$", DOCS.read_text(), flags=re.M)
    assert hook in sections, f"docs/plugins.md has no '## {hook}' section"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hookspec_has_a_test(hook):
    assert f"test_hook_{hook}" in vars(sys.modules[__name__]), f"no test_hook_{hook} in {__file__}"


class _Store:
    @classmethod
    def from_url(cls, url, options=None):
        return cls()


class _Provider:
    name = "toy"
    capabilities = Capabilities(multi_node=False)

    def __init__(self, config):
        self.config = config


def _plugin(**hooks):
    """A plugin object with the given hook implementations."""
    ns = {name: hookimpl(fn) for name, fn in hooks.items()}
    return type("InlinePlugin", (), {k: staticmethod(v) for k, v in ns.items()})()


def test_hook_register_storage():
    name = register_plugin(_plugin(register_storage=lambda register: register("toystore", _Store)), name="toy-storage")
    try:
        assert storage_registry().get("toystore").value is _Store
        assert storage_registry().get("toystore").plugin == "toy-storage"
    finally:
        unregister_plugin(name)


def test_hook_register_compute():
    name = register_plugin(_plugin(register_compute=lambda register: register("toy", _Provider)), name="toy-compute")
    try:
        reg = compute_registry().get("toy")
        assert reg.value is _Provider and reg.plugin == "toy-compute"
        assert reg.value({"nodes": 1}).capabilities.multi_node is False
    finally:
        unregister_plugin(name)


def test_hook_register_secret_types():
    kind = SecretType(
        kind="toytoken",
        description="a token",
        fields=(SecretField("token", "the token"),),
        inject=lambda name, values: SecretInjection(env={"TOY_TOKEN": values["token"]}),
    )
    name = register_plugin(_plugin(register_secret_types=lambda register: register("toytoken", kind)), name="toy-secrets")
    try:
        got = secret_type_registry().get("toytoken").value
        assert got.inject("x", {"token": "s3cr3t"}).env == {"TOY_TOKEN": "s3cr3t"}
    finally:
        unregister_plugin(name)


def test_hook_register_commands(capsys):
    import typer

    def register_commands(app: typer.Typer):
        @app.command("toy-hello")
        def hello(who: str = "world"):
            print(f"hello {who}")

    name = register_plugin(_plugin(register_commands=register_commands), name="toy-commands")
    try:
        from foundry.app.cli.main import main

        main(["toy-hello", "--who", "foundry"])
        assert "hello foundry" in capsys.readouterr().out
    finally:
        unregister_plugin(name)


def test_hook_on_run_event(caplog):
    seen = []

    def on_run_event(run_name, event, details):
        seen.append((run_name, event, details))

    def broken(run_name, event, details):
        raise RuntimeError("observer bug")

    first = register_plugin(_plugin(on_run_event=on_run_event), name="toy-observer")
    second = register_plugin(_plugin(on_run_event=broken), name="toy-broken-observer")
    try:
        notify_run_event("run-1", "paused", {"resumption": 0})
        assert seen == [("run-1", "paused", {"resumption": 0})]
        assert "toy-broken-observer" in caplog.text
    finally:
        unregister_plugin(first)
        unregister_plugin(second)
