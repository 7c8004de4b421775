"""Credentials against the real secret store: add (values typed into password inputs, never shown),
test against a bucket with the secret's values in a scoped environment, delete (Cancel default),
and read-only mode refusing all of it."""

from __future__ import annotations

import os

from textual.widgets import Button, Input, Select

SECRET = "sk-very-secret-value-123"


def test_add_test_delete_secret(plane, tui, tmp_path):
    bucket = tmp_path / "bucket"
    (bucket / "data").mkdir(parents=True)
    (bucket / "data" / "a.bin").write_bytes(b"x")

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("4")
            table = await tui.until(pilot, lambda: getattr(app.screen, "table", None), what="secrets view")
            await pilot.press("a")
            kind = await tui.until(pilot, lambda: app.screen.query_one("#secret-kind", Select), what="form")
            app.screen.query_one("#secret-name", Input).value = "r2-creds"
            kind.value = "s3"
            await tui.until(pilot, lambda: app.screen.query("#field-secret_access_key"), what="s3 fields")
            assert app.screen.query_one("#field-secret_access_key", Input).password
            assert not app.screen.query_one("#field-endpoint", Input).password
            app.screen.query_one("#field-access_key_id", Input).value = "AKIDEXAMPLE"
            app.screen.query_one("#field-secret_access_key", Input).value = SECRET
            app.screen.query_one("#field-endpoint", Input).value = "https://acct.r2.cloudflarestorage.com"
            await tui.press(pilot, "save")
            await tui.until(pilot, lambda: "r2-creds" in table.rows, what="secret row")
            assert tui.cell(table, "r2-creds", "kind") == "s3"
            assert tui.cell(table, "r2-creds", "value") == "••••••••"
            assert "acct.r2" in tui.cell(table, "r2-creds", "details")
            assert SECRET not in tui.text(app)
            assert plane.list_secrets()[0].name == "r2-creds"

            # t: list a bucket with the secret's values; the environment is restored afterwards
            await pilot.press("t")
            url = await tui.until(pilot, lambda: app.screen.query_one("#bucket-url", Input), what="test form")
            url.value = bucket.as_uri()
            await tui.press(pilot, "test")
            result = app.screen.query_one("#test-result")
            await tui.until(pilot, lambda: str(result.render()).startswith("ok"), what="bucket ok")
            assert "data/a.bin" in str(result.render())
            assert "AWS_SECRET_ACCESS_KEY" not in os.environ or os.environ["AWS_SECRET_ACCESS_KEY"] != SECRET
            assert SECRET not in tui.text(app)
            await pilot.press("escape")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "SecretsScreen", what="back")

            # ctrl+d: Cancel is focused; confirm deletes
            await pilot.press("ctrl+d")
            await tui.until(pilot, lambda: app.screen.query_one("#cancel", Button).has_focus, what="dialog")
            await tui.press(pilot, "confirm")
            await tui.until(pilot, lambda: "r2-creds" not in table.rows, what="deleted")
            assert plane.list_secrets() == []

    tui.run(body())


def test_readonly_disables_mutations(plane, tui):
    plane.create_secret("keep", "env", {"key": "TOKEN", "value": "hidden-token-value"})

    async def body():
        app = tui.make_app(plane, readonly=True)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("4")
            table = await tui.until(pilot, lambda: getattr(app.screen, "table", None), what="secrets view")
            await tui.until(pilot, lambda: "keep" in table.rows, what="row")
            for key in ("a", "t", "ctrl+d"):
                await pilot.press(key)
                await pilot.pause(0.2)
                assert type(app.screen).__name__ == "SecretsScreen"
            assert app.screen.check_action("delete", ()) is None
            await pilot.press("1")
            await tui.until(pilot, lambda: type(app.screen).__name__ == "RunsScreen", what="runs")
            for action in ("pause", "resume", "move", "delete", "new_run"):
                assert app.screen.check_action(action, ()) is None
            await pilot.press("n")
            await pilot.pause(0.2)
            assert type(app.screen).__name__ == "RunsScreen"
            assert "hidden-token-value" not in tui.text(app)
        assert [s.name for s in plane.list_secrets()] == ["keep"]

    tui.run(body())
