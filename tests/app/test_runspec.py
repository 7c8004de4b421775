"""Run specs: both YAML forms, precise errors (file, key, what is wrong, what is allowed), overrides."""

from __future__ import annotations

import pytest

from foundry.app.runspec import apply_overrides, load_spec, parse_spec
from foundry.plugins.errors import ConfigError

MODERN = """
name: tiny-gpt
image: python:3.11
command: python -m foundry.examples.gpt
compute: {cluster: local, gpus: 2, nodes: 1, gpu_type: a100}
env_variables: {SEED: "17"}
secrets: [r2]
integrations:
  - {integration_type: pip_packages, packages: [numpy]}
scheduling: {max_retries: 2, priority: high}
"""

LEGACY = """
run_name: mpt-7b
gpu_num: 8
gpu_type: a100_80gb
cluster: r1z1
image: mosaicml/llm-foundry:2.0.1_cu118-latest
integrations:
  - integration_type: git_repo
    git_repo: mosaicml/llm-foundry
    git_branch: v0.3.0
    pip_install: -e .[gpu]
    ssh_clone: false
command: |
  cd llm-foundry/scripts
  composer train/train.py /mnt/config/parameters.yaml
env_variables:
  - key: FOO
    value: bar
parameters:
  max_duration: 10ba
"""


def write(tmp_path, text, name="run.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_modern_form(tmp_path):
    spec = load_spec(write(tmp_path, MODERN))
    assert spec.name == "tiny-gpt"
    assert (spec.compute.cluster, spec.compute.gpus, spec.compute.gpu_type) == ("local", 2, "a100")
    assert spec.env_variables == {"SEED": "17"}
    assert spec.scheduling.max_retries == 2
    assert spec.integrations[0].setup_commands() == ["python -m pip install numpy"]


def test_legacy_mcli_form_normalizes(tmp_path):
    spec = load_spec(write(tmp_path, LEGACY))
    assert spec.name == "mpt-7b"
    assert spec.compute.gpus == 8 and spec.compute.gpu_type == "a100_80gb" and spec.compute.cluster == "r1z1"
    assert spec.env_variables == {"FOO": "bar"}
    assert spec.parameters == {"max_duration": "10ba"}
    setup = spec.integrations[0].setup_commands()
    assert setup[0].endswith("git clone --branch v0.3.0 https://github.com/mosaicml/llm-foundry.git llm-foundry")
    assert "python -m pip install -e .[gpu]" in setup[-1]
    normalized = spec.to_dict()
    assert "run_name" not in normalized and normalized["compute"]["gpus"] == 8


@pytest.mark.parametrize("text, expected", [
    ("name: a\ncommand: x\ncompute: {gpus: -1}\n", "run.yaml: compute.gpus: must be greater than or equal to 0 (got -1)"),
    ("name: a\ncommand: x\ncompute: {gpu: 1}\n", "compute.gpu: unknown key; allowed here: cluster, gpus, nodes, gpu_type, instance"),
    ("name: a\ncommand: x\nscheduling: {priority: urgent}\n", "scheduling.priority: allowed: 'low', 'medium' or 'high' (got 'urgent')"),
    ("name: a\ncommand: x\nintegrations: [{integration_type: svn}]\n", "integrations.0: unknown integration_type 'svn'; allowed: git_repo, pip_packages"),
    ("name: Bad_Name\ncommand: x\n", "name: 'Bad_Name' is not a valid run name"),
    ("name: a\n", "give a `command` (what to run) or `parameters`"),
    ("name: a\ncommand: x\ncompute: {gpus: 3, nodes: 2}\n", "gpus (3) must be a multiple of nodes (2)"),
    ("name: a\ncommand: x\nrun_name: b\n", "both `run_name` and `name` are set"),
    ("command: x\n", "name: required key is missing"),
    ("name: a\ncommand: x\nenv_variables: {1X: y}\n", "invalid environment variable name(s): 1X"),
    ("- just\n- a list\n", "a run spec must be a mapping"),
    ("name: a\ncommand: [unclosed\n", "run.yaml: line"),
])
def test_errors_are_precise(tmp_path, text, expected):
    with pytest.raises(ConfigError) as info:
        load_spec(write(tmp_path, text))
    assert expected in str(info.value)
    assert info.value.exit_code == 2


def test_missing_file():
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec("/nonexistent/run.yaml")


def test_overrides_revalidate():
    spec = parse_spec({"name": "a", "command": "x", "compute": {"gpus": 4, "nodes": 2}})
    new = apply_overrides(spec, name="b", cluster="hpc", gpus=2, nodes=1)
    assert (new.name, new.compute.cluster, new.compute.gpus, new.compute.nodes) == ("b", "hpc", 2, 1)
    with pytest.raises(ConfigError, match="compute.gpus"):
        apply_overrides(spec, gpus=-2)
