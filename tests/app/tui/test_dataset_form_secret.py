"""Issue 34.3: the TUI's add-dataset form has a secret field. A dataset in a private bucket added
from the form with a stored secret is read with it (SeaweedFS, no credentials in the environment);
the registry records the secret as `foundry dataset add --secret` would; Enter submits the form."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select

from foundry.app.control.datasets import DatasetRegistry

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def private_dataset(s3_server, monkeypatch):
    """An MDS dataset in a fresh bucket whose keys then leave the environment (only a secret has them)."""
    from foundry.streaming import MDSWriter

    bucket = s3_server.create_bucket()
    url = f"s3://{bucket}/reviews"
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    with MDSWriter(out=url, columns={"text": "str", "n": "int"}) as writer:
        for i in range(30):
            writer.write({"text": f"review {i}", "n": i})
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    return url


def test_add_dataset_form_reads_a_private_bucket_with_the_chosen_secret(plane, tui, s3_server, private_dataset):
    plane.create_secret("seaweed", "s3", {"access_key_id": s3_server.access_key,
                                          "secret_access_key": s3_server.secret_key,
                                          "endpoint": s3_server.endpoint})

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(140, 36)) as pilot:
            await pilot.press("3", "a")
            secret = await tui.until(pilot, lambda: (s := app.screen.query_one("#dataset-secret", Select))
                                     and s._options[1:] and s, what="the secret choices")
            assert [value for _, value in secret._options[1:]] == ["seaweed"]
            assert app.screen.query_one("#dataset-url", Input).has_focus
            await pilot.press(*private_dataset)
            app.screen.query_one("#dataset-name", Input).value = "reviews"
            secret.value = "seaweed"
            app.screen.query_one("#dataset-url", Input).focus()
            await pilot.press("enter")   # Enter submits the form
            table = await tui.until(pilot, lambda: type(app.screen).__name__ == "DatasetsScreen"
                                    and app.screen.table, what="back on the datasets view")
            await tui.until(pilot, lambda: tui.cell(table, "reviews", "samples") == "30", what="read with the secret")
            text = tui.text(app)
            assert s3_server.secret_key not in text and s3_server.access_key not in text
    tui.run(body())
    assert [(e.name, e.secret) for e in DatasetRegistry(plane.paths.home).list()] == [("reviews", "seaweed")]
