from foundry.plugins.errors import ConfigError, CredentialsError, FoundryError, StorageError


def test_error_carries_hint_and_exit_code():
    err = ConfigError("bad thing", hint="do this")
    assert str(err) == "bad thing (do this)"
    assert err.exit_code == 2
    assert StorageError("x").exit_code == 1
    assert CredentialsError("x").exit_code == 2
    assert isinstance(err, FoundryError)
