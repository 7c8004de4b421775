"""Malformed-input probes (issue 15 items 2, 4, 5): every bad input is one error line (plus its
hint), exit code 2, and nothing written; names from users never reach the file system unchecked."""

from __future__ import annotations

import json

import pytest

from foundry.plugins.errors import ConfigError

BOMB = "\n".join([
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    *[f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")],
    "name: bomb", "command: echo",
]) + "\n"


def one_line_error(code: int, err: str) -> str:
    """The CLI's error contract: exit 2, 'error: ...' and at most a hint line, no traceback."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert lines and lines[0].startswith("error: "), err
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("  hint: ")), err
    assert "Traceback" not in err
    return lines[0]


def nothing_written(cp) -> None:
    assert cp.registry.list_runs() == []
    assert not cp.paths.runs_dir.exists() or not any(cp.paths.runs_dir.iterdir())
    assert not cp.paths.secrets_dir.exists() or not any(cp.paths.secrets_dir.glob("*.json"))


def spec_file(tmp_path, text: str | bytes, name: str = "run.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


# --- item 2: names -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["../../victim", "../victim", "/etc/passwd", "a/b", "Upper", "x.y", "x" * 64, ".."])
def test_secret_names_that_are_paths_are_refused(cli, cp, tmp_path, bad):
    victim = cp.paths.home / "victim.json"
    victim.write_text("{}")
    outside = tmp_path / "victim.json"
    outside.write_text("{}")
    assert "not a valid secret name" in one_line_error(*cli("delete", "secret", bad)[::2])
    assert "not a valid secret name" in one_line_error(
        *cli("create", "secret", "env", bad, "--key", "K", "--value", "v")[::2])
    assert victim.exists() and outside.exists()
    nothing_written(cp)


def test_every_entry_point_checks_names_with_the_one_rule(cli, cp, tmp_path):
    from foundry.app import sdk
    from foundry.app.control.datasets import DatasetRegistry

    spec = spec_file(tmp_path, "name: ok\ncommand: echo\nsecrets: ['../../x']\n")
    assert "'../../x' is not a valid secret name" in one_line_error(*cli("run", "-f", spec, "--dry-run")[::2])
    assert "not a valid run name" in one_line_error(
        *cli("run", "-f", spec_file(tmp_path, "name: ok\ncommand: echo\n"), "--name", "../x", "--dry-run")[::2])
    assert "not a valid cluster name" in one_line_error(*cli("create", "cluster", "../c", "--provider", "local")[::2])
    assert "not a valid cluster name" in one_line_error(
        *cli("run", "-f", spec_file(tmp_path, "name: ok\ncommand: echo\n"), "--cluster", "../c", "--dry-run")[::2])
    assert "not a valid run name" in one_line_error(*cli("describe", "run", "../../etc")[::2])
    assert "not a valid run name" in one_line_error(*cli("delete", "run", "..", "--yes")[::2])
    assert "not a valid dataset name" in one_line_error(*cli("dataset", "add", str(tmp_path), "--name", "../d")[::2])
    # the SDK and the TUI call the control plane: the same rule, the same error
    for call in (lambda: cp.create_secret("../x", "env", {"key": "K", "value": "v"}),
                 lambda: cp.delete_secret("../../victim"),
                 lambda: cp.create_run({"name": "ok", "command": "echo", "secrets": ["../x"]}),
                 lambda: sdk.get_run("../x"),
                 lambda: cp.delete_cluster("../x"),
                 lambda: DatasetRegistry(cp.paths.home).add(str(tmp_path), "../d")):
        with pytest.raises(ConfigError, match="is not a valid (secret|run|cluster|dataset) name"):
            call()
    nothing_written(cp)


def test_default_dataset_names_follow_the_rule(cp, tmp_path):
    from foundry.app.control.datasets import DatasetRegistry
    from foundry.app.names import NAME_RE

    entry = DatasetRegistry(cp.paths.home).add("s3://My_Bucket/Train Data")
    assert entry.name == "my-bucket-train-data" and NAME_RE.match(entry.name)


# --- item 4: YAML alias bomb ---------------------------------------------------------------------
def test_yaml_alias_bomb_is_refused_before_it_expands(foundry_proc, tmp_path, cp):
    proc = foundry_proc("run", "-f", spec_file(tmp_path, BOMB), "--dry-run", timeout=30)
    line = one_line_error(proc.returncode, proc.stderr.decode())
    assert "expands to more than" in line
    assert "YAML contains itself" in one_line_error(
        *_in_process(tmp_path, "a: &a [*a]\nname: x\ncommand: echo\n"))
    nothing_written(cp)


def test_oversized_spec_and_a_bomb_in_clusters_yaml_are_refused(cli, cp, tmp_path):
    big = spec_file(tmp_path, "name: big\ncommand: echo\n# " + "x" * (5 << 20) + "\n")
    assert "is too large for a Foundry YAML file" in one_line_error(*cli("run", "-f", big, "--dry-run")[::2])
    cp.paths.clusters_file.write_text(BOMB)
    assert "expands to more than" in one_line_error(*cli("get", "clusters")[::2])
    nothing_written(cp)


def _in_process(tmp_path, text):
    from foundry.app.cli.main import main

    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exc:
        main(["run", "-f", spec_file(tmp_path, text, "self.yaml"), "--dry-run"])
    return exc.value.code, err.getvalue()


def test_anchors_a_real_spec_uses_still_work(cli, tmp_path):
    text = "name: anchors\ncommand: echo\nenv_variables: &env {A: '1'}\nparameters: {copy: *env}\n"
    code, out, err = cli("run", "-f", spec_file(tmp_path, text), "--dry-run")
    assert code == 0, err


# --- item 5: the input gaps ----------------------------------------------------------------------
@pytest.mark.parametrize("text, args, expect", [
    ("name: g\ncommand: echo\ncompute: {gpus: 1000000000000000000000000000000}\n", (), "compute.gpus: must be less"),
    ("name: g\ncommand: echo\n", ("--gpus", "99999999999999999999"), "compute.gpus: must be less"),
    ("name: g\ncommand: echo\n", ("--nodes", "99999999999999999999"), "compute.nodes: must be less"),
    ("name: g\ncommand: echo\n", ("--nodes", "2"), "runs on one node (asked for 2)"),
    ("name: g\ncommand: echo\n", ("--gpus", "5000"), "5000 processes per node is more than"),  # CPU capacity   # above the cluster's capacity
    ("name: g\ncommand: echo\n", ("--nodes", "0"), "compute.nodes"),
    ("name: g\ncommand: echo\nbogus: 1\n", (), "bogus: unknown key"),
    ("name: g\ncommand: echo\nenv_variables: !!python/object/apply:os.system ['true']\n", (), "invalid YAML"),
    ("name: Bad_Name\ncommand: echo\n", (), "not a valid run name"),
    ("name: g\nparameters: {model: 'm:f', train_dataloader: 'd:f', max_duration: '1e400ba'}\n", (),
     "parameters.max_duration: invalid time '1e400ba': too large"),
    ("name: g\nparameters: {model: 'm:f', train_dataloader: 'd:f', max_duration: '-5ba'}\n", (),
     "parameters.max_duration: invalid time"),
    ("name: g\nparameters: {model: 'm:f', train_dataloader: 'd:f', max_duration: 10ba, lr: 3}\n", (),
     "unknown key(s) lr"),
    ("name: g\nparameters: {model: 'm:f', max_duration: 10ba}\n", (), "needs train_dataloader"),
    ("name: g\nparameters: {model: nonsense, train_dataloader: 'd:f', max_duration: 10ba}\n", (),
     "parameters.model: 'nonsense' is not a 'module:callable'"),
    (b"name: g\ncommand: echo \xff\xfe\n", (), "not UTF-8 text"),
])
def test_bad_specs_are_one_line_errors_and_nothing_is_written(cli, cp, tmp_path, text, args, expect):
    path = spec_file(tmp_path, text)
    for dry in (("--dry-run",), ()):
        assert expect in one_line_error(*cli("run", "-f", path, *args, *dry)[::2])
    nothing_written(cp)


def test_not_utf8_from_a_real_process(foundry_proc, tmp_path):
    proc = foundry_proc("run", "-f", spec_file(tmp_path, b"name: x\ncommand: \xc3\x28\n"), "--dry-run")
    assert "not UTF-8 text (byte 0xc3 at offset 17)" in one_line_error(proc.returncode, proc.stderr.decode())


def test_good_trainer_parameters_pass_the_dry_run(cli, tmp_path):
    text = ("name: t\nparameters: {model: 'pkg.models:build', model_args: {n: 1}, train_dataloader: 'pkg.data:loader',"
            " max_duration: 2ep, save_interval: 1ep, optimizer: {name: SGD, lr: 0.1}, precision: fp32}\n")
    code, out, err = cli("--json", "run", "-f", spec_file(tmp_path, text), "--dry-run")
    assert code == 0, err
    assert json.loads(out)["spec"]["parameters"]["max_duration"] == "2ep"


def test_parameter_check_knows_every_trainer_argument():
    """The dry run's key list and the Trainer's signature must not drift apart."""
    import inspect

    from foundry.trainer.parameters import FACTORY_KEYS, known_keys
    from foundry.trainer.trainer import Trainer

    taken = {"model", "train_dataloader", "optimizers", "schedulers", "loss_fn", "eval_dataloader", "loggers",
             "callbacks", "settings"}   # given by trainer/__main__.py from the factory keys, or objects
    params = set(inspect.signature(Trainer.__init__).parameters) - {"self"} - taken
    assert params <= known_keys(), params - known_keys()
    assert set(FACTORY_KEYS) <= known_keys()


def test_duration_overflow_in_the_trainer_is_a_config_error():
    from foundry.trainer.time import Time, TimeUnit

    for text in ("1e400ba", "1e19tok", 10**400):
        with pytest.raises(ConfigError, match="too large"):
            Time.parse(text, default_unit=TimeUnit.BATCH)
    assert Time.parse("5e6tok").value == 5_000_000
