"""Issue 34.6: a run spec that is wrong fails before anything starts, with one line and exit 2: a
NUL byte in `command`, null / list values in env_variables, `gpus: true`, a multi-megabyte spec
(refused by its size at once, not parsed for minutes, and not blamed on aliases); and `--name`
names a spec that has none."""

from __future__ import annotations

import pytest


def _one_line(code: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert lines[0].startswith("error: ") and len(lines) <= 2 and "Traceback" not in err, err
    return lines[0]


def _nothing_started(cp) -> None:
    assert cp.registry.list_runs() == []
    assert not cp.paths.runs_dir.exists() or not any(cp.paths.runs_dir.iterdir())


@pytest.mark.parametrize("text, expect", [
    ('name: a\ncommand: ["echo", "a\\0b"]\n', "command: holds a NUL byte"),
    ('name: a\ncommand: "echo a\\0b"\n', "command: holds a NUL byte"),
    ("name: a\ncommand: echo\nenv_variables: {A: null}\n", "env_variables: A is empty (null)"),
    ("name: a\ncommand: echo\nenv_variables: {A: [1, 2]}\n", "env_variables: A is a list"),
    ("name: a\ncommand: echo\nenv_variables: {A: {b: 1}}\n", "env_variables: A is a dict"),
    ('name: a\ncommand: echo\nenv_variables: {A: "x\\0y"}\n', "env_variables: A holds a NUL byte"),
    ("name: a\ncommand: echo\ncompute: {gpus: true}\n", "compute.gpus: must be a whole number (got true)"),
    ("name: a\ncommand: echo\ncompute: {nodes: false}\n", "compute.nodes: must be a whole number (got false)"),
    ("name: a\ncommand: echo\nscheduling: {max_retries: true}\n", "scheduling.max_retries: must be a whole number"),
    ("command: echo\n", "name: required key is missing (add `name: ...` to the spec, or give --name)"),
])
def test_wrong_specs_are_refused_before_anything_starts(cli, cp, tmp_path, text, expect):
    spec = tmp_path / "run.yaml"
    spec.write_text(text)
    for dry in (("--dry-run",), ()):
        code, _out, err = cli("run", "-f", str(spec), *dry)
        assert expect in _one_line(code, err)
    _nothing_started(cp)


def test_a_few_megabytes_of_spec_are_refused_by_size_not_blamed_on_aliases(cli, cp, tmp_path):
    spec = tmp_path / "big.yaml"
    values = "".join(f"    - value-{i}\n" for i in range(200_000))   # 3.4 MB of plain list items
    spec.write_text("name: big\ncommand: echo\nparameters:\n  values:\n" + values)
    assert spec.stat().st_size > 3_000_000
    line = _one_line(*cli("run", "-f", str(spec), "--dry-run")[::2])
    assert f"big.yaml: {spec.stat().st_size:,} bytes is too large for a Foundry YAML file (limit 1,048,576)" in line
    assert "alias" not in line
    _nothing_started(cp)


@pytest.mark.slow
def test_many_values_without_aliases_say_so(cli, tmp_path):
    spec = tmp_path / "many.yaml"
    spec.write_text("name: many\ncommand: echo\nparameters: {v: [" + ",".join(["1"] * 250_000) + "]}\n")
    line = _one_line(*cli("run", "-f", str(spec), "--dry-run")[::2])
    assert "holds more than 200,000 values" in line and "alias" not in line


def test_name_flag_names_a_spec_without_one(cli, tmp_path):
    spec = tmp_path / "run.yaml"
    spec.write_text("command: echo\n")
    code, out, err = cli("run", "-f", str(spec), "--name", "from-flag", "--dry-run")
    assert code == 0, err
    assert "name: from-flag" in out
    spec.write_text("name: in-file\ncommand: echo\n")   # a name in the file is still overridden
    code, out, err = cli("run", "-f", str(spec), "--name", "from-flag", "--dry-run")
    assert code == 0 and "name: from-flag" in out, err
