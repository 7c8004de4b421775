"""A dataset in a bucket that needs a stored secret: `foundry dataset add --secret` binds one, and the
TUI's Datasets screen and sample browser read it with that secret (SeaweedFS; no credentials in the
environment), while the same URL without the secret says it has no credentials."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from foundry.app.control.datasets import DatasetRegistry

pytestmark = pytest.mark.integration


@pytest.fixture
def private_dataset(s3_server, monkeypatch):
    """An MDS dataset in a fresh bucket, written with the server's keys, which are then removed from
    the environment (they live only in the stored secret `seaweed`)."""
    from foundry.streaming import MDSWriter

    bucket = s3_server.create_bucket()
    url = f"s3://{bucket}/reviews"
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    for out in (url, url + "-copy"):
        with MDSWriter(out=out, columns={"text": "str", "n": "int"}) as writer:
            for i in range(40):
                writer.write({"text": f"review {i}", "n": i})
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    return url


def test_dataset_read_with_its_stored_secret(plane, tui, cli, s3_server, private_dataset):
    code, _, err = cli("dataset", "add", private_dataset, "--name", "reviews", "--secret", "seaweed")
    assert code == 2 and "no secret named 'seaweed'" in err
    plane.create_secret("seaweed", "s3", {"access_key_id": s3_server.access_key,
                                          "secret_access_key": s3_server.secret_key,
                                          "endpoint": s3_server.endpoint})
    assert cli("dataset", "add", private_dataset, "--name", "reviews", "--secret", "seaweed")[0] == 0
    DatasetRegistry(plane.paths.home).add(private_dataset + "-copy", "no-secret")
    assert [(e.name, e.secret) for e in DatasetRegistry(plane.paths.home).list()] == [
        ("reviews", "seaweed"), ("no-secret", None)]

    async def body():
        app = tui.make_app(plane)
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("3")
            await tui.until(pilot, lambda: tui.cell(app.screen.table, "reviews", "samples") == "40", what="summary")
            error = await tui.until(pilot, lambda: (c := tui.cell(app.screen.table, "no-secret", "compression"))
                                    .startswith("error") and c, what="the error of the dataset without a secret")
            assert "credentials" in error
            app.screen.table.move_cursor(row=0)
            await pilot.press("d")
            await tui.until(pilot, lambda: app.screen.query("#samples") and app.screen.query_one("#samples").row_count
                            == 20, what="samples (the first page)")
            assert "reading index.json" not in str(app.screen.query_one("#dataset-summary", Static).render())

    tui.run(body())
