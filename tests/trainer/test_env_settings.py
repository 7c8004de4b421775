"""Settings a tool gives a training script from outside (foundry verify-resume): each variable, when
set, wins over the script's argument; unset, nothing changes."""

from __future__ import annotations

import pytest

from foundry.plugins.errors import ConfigError
from foundry.trainer.env_settings import apply_env


def test_set_variables_win_over_the_scripts_arguments():
    env = {"FOUNDRY_RUN_NAME": "checked", "FOUNDRY_SAVE_FOLDER": "file:///ck/{run_name}",
           "FOUNDRY_SAVE_INTERVAL": "4ba", "FOUNDRY_AUTORESUME": "1"}
    name, settings = apply_env("mine", {"save_folder": "s3://bucket/mine", "autoresume": False}, env)
    assert name == "checked"
    assert settings == {"save_folder": "file:///ck/{run_name}", "save_interval": "4ba", "autoresume": True}


def test_unset_variables_change_nothing():
    assert apply_env("mine", {"save_interval": "1ep"}, {}) == ("mine", {"save_interval": "1ep"})
    assert apply_env("mine", {}, {"FOUNDRY_AUTORESUME": "no"}) == ("mine", {"autoresume": False})


def test_a_bad_autoresume_value_is_one_clear_error():
    with pytest.raises(ConfigError, match="FOUNDRY_AUTORESUME"):
        apply_env("mine", {}, {"FOUNDRY_AUTORESUME": "maybe"})
