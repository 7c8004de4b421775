"""Secrets: stored 0600, listed without values, injected per type, and never in CLI output,
logs, error messages or the registry database."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys

import pytest

from foundry.app.control.secrets import SecretStore
from foundry.plugins.errors import ConfigError, CredentialsError

ACCESS = "AKIAFOUNDRYTEST0001"
SECRET = "s3cr3t-Value-Never-Shown-42"
TOKEN = "hf_tokenValueThatMustNotLeak"


def test_store_files_are_private_and_listing_has_no_values(cp):
    info = cp.create_secret("r2", "s3", {"access_key_id": ACCESS, "secret_access_key": SECRET,
                                         "endpoint": "https://acct.r2.cloudflarestorage.com"})
    assert info.public == {"endpoint": "https://acct.r2.cloudflarestorage.com"}
    path = cp.paths.secrets_dir / "r2.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(cp.paths.secrets_dir).st_mode) == 0o700
    listed = json.dumps([i.to_dict() for i in cp.list_secrets()])
    assert "r2" in listed and SECRET not in listed and ACCESS not in listed
    env = cp.secrets.injection("r2").env
    assert env["AWS_SECRET_ACCESS_KEY"] == SECRET and env["S3_ENDPOINT_URL"].startswith("https://acct")
    cp.delete_secret("r2")
    assert cp.list_secrets() == []


def test_validation_errors_name_fields_not_values(cp):
    with pytest.raises(ConfigError, match="needs secret_access_key"):
        cp.create_secret("a", "s3", {"access_key_id": ACCESS})
    with pytest.raises(ConfigError, match="has no field"):
        cp.create_secret("a", "env", {"key": "X", "value": TOKEN, "bogus": TOKEN})
    with pytest.raises(ConfigError, match="unknown secret type 'vault'"):
        cp.create_secret("a", "vault", {})
    cp.create_secret("a", "env", {"key": "X", "value": TOKEN})
    with pytest.raises(ConfigError) as info:
        cp.create_secret("a", "env", {"key": "X", "value": TOKEN})
    assert TOKEN not in str(info.value)
    with pytest.raises(CredentialsError, match="no secret named 'nope'"):
        SecretStore(cp.paths.secrets_dir).injection("nope")


def test_file_types_inject_files_and_point_at_them(cp):
    cp.create_secret("oci-main", "oci", {"config": "[DEFAULT]\nuser=ocid1\nkey_file=~/.oci/key.pem\n",
                                         "key": "-----BEGIN PRIVATE KEY-----\nabc\n"})
    inj = cp.secrets.injection("oci-main")
    config = inj.files[inj.env["OCI_CONFIG_FILE"]].decode()
    assert "key_file=/foundry/secrets/oci-main/key.pem" in config
    cp.create_secret("gke", "gcp", {"credentials": '{"type": "service_account"}'})
    inj = cp.secrets.injection("gke")
    assert inj.files[inj.env["GOOGLE_APPLICATION_CREDENTIALS"]] == b'{"type": "service_account"}'


@pytest.mark.subprocess
def test_no_secret_value_anywhere(cli, cp, tmp_path):
    """CLI output (tables and JSON, dry run, describe), job logs and the registry never hold a value."""
    kube = tmp_path / "kubeconfig"
    kube.write_text("token: kubeTokenNeverShown99\n")
    assert cli("create", "secret", "s3", "r2", "--access-key-id", ACCESS, "--secret-access-key", SECRET,
               "--endpoint", "http://127.0.0.1:9")[0] == 0
    assert cli("create", "secret", "env", "hf", "--key", "HF_TOKEN", "--value", TOKEN)[0] == 0
    assert cli("create", "secret", "kubeconfig", "kube", "--kubeconfig", str(kube))[0] == 0
    digest = lambda v: hashlib.sha256(v.encode()).hexdigest()  # noqa: E731 - the job compares hashes
    check = (f"import os, hashlib; h = lambda v: hashlib.sha256(v.encode()).hexdigest(); "
             f"assert h(os.environ['HF_TOKEN']) == {digest(TOKEN)!r}; "
             f"assert h(os.environ['AWS_SECRET_ACCESS_KEY']) == {digest(SECRET)!r}; "
             f"assert h(open(os.environ['KUBECONFIG']).read()) == {digest(kube.read_text())!r}; print('secrets ok')")
    spec = tmp_path / "run.yaml"
    spec.write_text(json.dumps({"name": "uses-secrets", "command": [sys.executable, "-c", check],
                                "secrets": ["r2", "hf", "kube"], "compute": {"gpus": 1}}))
    outputs = [cli("get", "secrets"), cli("--json", "get", "secrets"),
               cli("run", "-f", str(spec), "--dry-run"), cli("--json", "run", "-f", str(spec), "--dry-run"),
               cli("run", "-f", str(spec), "--follow"),
               cli("describe", "run", "uses-secrets"), cli("--json", "describe", "run", "uses-secrets"),
               cli("logs", "uses-secrets"), cli("get", "runs"),
               cli("create", "secret", "env", "hf", "--key", "HF_TOKEN", "--value", TOKEN)]
    text = "\n".join(out + err for _, out, err in outputs)
    assert "secrets ok" in text and "AWS_SECRET_ACCESS_KEY=***" in text and "already exists" in text
    assert cp.get_run("uses-secrets").status == "completed"
    leaks = [ACCESS, SECRET, TOKEN, "kubeTokenNeverShown99"]
    for value in leaks:
        assert value not in text
    stored = b""
    for path in cp.paths.home.rglob("*"):
        if path.is_file() and cp.paths.secrets_dir not in path.parents:  # job secret files are gone too
            stored += path.read_bytes()
    assert b"uses-secrets" in stored  # the registry and logs were read
    for value in leaks:
        assert value.encode() not in stored


R2_KEY = "r2SecretFromAwsFileNeverShown7"
STDIN_TOKEN = "stdinTokenNeverShown55"
FILE_TOKEN = "fileTokenNeverShown66"
MCLI_TOKEN = "mcliTokenNeverShown77"


@pytest.mark.subprocess
def test_script_forms_store_values_and_never_show_them(cli, cp, tmp_path, monkeypatch):
    """stdin (`-`), --from-file, mcli's env KEY=VALUE and s3 AWS-files forms: stored 0600, injected
    into the job, and absent from every output, log, error and the registry (as above)."""
    import io

    creds, config = tmp_path / "credentials", tmp_path / "config"
    creds.write_text(f"[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = nope\n"
                     f"[r2]\naws_access_key_id = AKIAR2\naws_secret_access_key = {R2_KEY}\n")
    config.write_text("[default]\nregion = us-east-1\n[profile r2]\nregion = auto\n"
                      "s3 =\n  endpoint_url = https://acct.r2.cloudflarestorage.com\n")
    token_file = tmp_path / "token.txt"
    token_file.write_text(FILE_TOKEN + "\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(STDIN_TOKEN + "\n"))
    outputs = [cli("create", "secret", "env", "from-stdin", "--key", "STDIN_TOKEN", "--from-file", "-")]
    monkeypatch.setattr("sys.stdin", io.StringIO(R2_KEY))
    outputs += [cli("create", "secret", "s3", "s3-stdin", "--access-key-id", "AKIA1", "--secret-access-key", "-"),
                cli("create", "secret", "env", "from-file", "--key", "FILE_TOKEN", "--from-file", str(token_file)),
                cli("create", "secret", "env", f"MCLI_TOKEN={MCLI_TOKEN}"),
                cli("create", "secret", "s3", "--name", "r2", "--config-file", str(config),
                    "--credentials-file", str(creds), "--profile", "r2"),
                # refusals name the problem, never the value
                cli("create", "secret", "env", "bad-key", "--key", "A-B", "--value", MCLI_TOKEN),
                cli("create", "secret", "env", f"MCLI_TOKEN={MCLI_TOKEN}"),
                cli("create", "secret", "env", "both", "--key", "K", "--value", MCLI_TOKEN, "--from-file", str(token_file))]
    codes = [code for code, _, _ in outputs]
    assert codes == [0, 0, 0, 0, 0, 2, 2, 2], outputs
    assert "'A-B' is not a valid environment variable name" in outputs[5][2]
    for name in ("from-stdin", "s3-stdin", "from-file", "mcli-token", "r2"):
        assert os.stat(cp.paths.secrets_dir / f"{name}.json").st_mode & 0o777 == 0o600
    assert cp.secrets.injection("from-stdin").env == {"STDIN_TOKEN": STDIN_TOKEN}   # echo's newline dropped
    assert cp.secrets.injection("from-file").env == {"FILE_TOKEN": FILE_TOKEN}
    assert cp.secrets.injection("mcli-token").env == {"MCLI_TOKEN": MCLI_TOKEN}
    r2 = cp.secrets.injection("r2").env
    assert r2["AWS_ACCESS_KEY_ID"] == "AKIAR2" and r2["AWS_SECRET_ACCESS_KEY"] == R2_KEY
    assert r2["S3_ENDPOINT_URL"] == "https://acct.r2.cloudflarestorage.com" and r2["AWS_DEFAULT_REGION"] == "auto"
    digest = lambda v: hashlib.sha256(v.encode()).hexdigest()  # noqa: E731 - the job compares hashes
    check = (f"import os, hashlib; h = lambda v: hashlib.sha256(v.encode()).hexdigest(); "
             f"assert h(os.environ['STDIN_TOKEN']) == {digest(STDIN_TOKEN)!r}; "
             f"assert h(os.environ['AWS_SECRET_ACCESS_KEY']) == {digest(R2_KEY)!r}; print('script secrets ok')")
    spec = tmp_path / "run.yaml"
    spec.write_text(json.dumps({"name": "script-secrets", "command": [sys.executable, "-c", check],
                                "secrets": ["from-stdin", "r2", "from-file", "mcli-token"]}))
    outputs += [cli("get", "secrets"), cli("--json", "get", "secrets"), cli("run", "-f", str(spec), "--dry-run"),
                cli("run", "-f", str(spec), "--follow"), cli("--json", "describe", "run", "script-secrets"),
                cli("logs", "script-secrets")]
    text = "\n".join(out + err for _, out, err in outputs)
    assert "script secrets ok" in text and cp.get_run("script-secrets").status == "completed"
    stored = b"".join(p.read_bytes() for p in cp.paths.home.rglob("*")
                      if p.is_file() and cp.paths.secrets_dir not in p.parents)
    for value in (STDIN_TOKEN, FILE_TOKEN, MCLI_TOKEN, R2_KEY):
        assert value not in text and value.encode() not in stored


def test_aws_files_errors_name_the_file_and_profile_not_values(tmp_path):
    from foundry.app.control.aws_files import s3_values_from_aws_files

    creds = tmp_path / "credentials"
    creds.write_text(f"[default]\naws_access_key_id = AKIA\naws_session_token = {TOKEN}\naws_secret_access_key = x\n")
    with pytest.raises(ConfigError, match="aws_session_token") as info:
        s3_values_from_aws_files(None, creds)
    assert TOKEN not in str(info.value)
    with pytest.raises(ConfigError, match=r"has no \[work\] profile"):
        s3_values_from_aws_files(None, creds, "work")
    (tmp_path / "bad").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        s3_values_from_aws_files(tmp_path / "bad", None)


@pytest.fixture
def os_keyring(tmp_path):
    """A real keyring backend (keyrings.alt's file backend) in tmp_path, set for this test only."""
    keyring = pytest.importorskip("keyring")
    alt = pytest.importorskip("keyrings.alt.file")
    backend = alt.PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


def test_keyring_store_keeps_secret_values_out_of_the_file(os_keyring, monkeypatch):
    from foundry.app.control import ControlPlane

    monkeypatch.setenv("FOUNDRY_SECRET_STORE", "keyring")
    cp = ControlPlane()
    info = cp.create_secret("r2", "s3", {"access_key_id": ACCESS, "secret_access_key": SECRET, "region": "auto"})
    assert info.fields == ["access_key_id", "region", "secret_access_key"] and info.public == {"region": "auto"}
    record = (cp.paths.secrets_dir / "r2.json").read_text()
    assert SECRET not in record and ACCESS not in record and '"vault": "keyring"' in record
    assert os.stat(cp.paths.secrets_dir / "r2.json").st_mode & 0o777 == 0o600
    assert cp.secrets.injection("r2").env["AWS_SECRET_ACCESS_KEY"] == SECRET
    monkeypatch.setenv("FOUNDRY_SECRET_STORE", "file")     # stored in the keyring: still found there
    assert ControlPlane().secrets.injection("r2").env["AWS_ACCESS_KEY_ID"] == ACCESS
    assert [i.name for i in ControlPlane().list_secrets()] == ["r2"]
    ControlPlane().delete_secret("r2")
    assert os_keyring.get_password(f"foundry:{cp.paths.home}", "r2") is None


@pytest.mark.parametrize("missing", ["package", "backend"])
def test_keyring_asked_for_but_missing_falls_back_to_the_0600_file(monkeypatch, missing):
    from foundry.app.control import ControlPlane

    if missing == "package":
        monkeypatch.setitem(sys.modules, "keyring", None)   # `import keyring` raises ImportError
    else:
        keyring = pytest.importorskip("keyring")
        from keyring.backends import fail

        previous = keyring.get_keyring()
        keyring.set_keyring(fail.Keyring())
    try:
        monkeypatch.setenv("FOUNDRY_SECRET_STORE", "keyring")
        cp = ControlPlane()
        cp.create_secret("hf", "env", {"key": "HF_TOKEN", "value": TOKEN})
        path = cp.paths.secrets_dir / "hf.json"
        assert TOKEN in path.read_text() and os.stat(path).st_mode & 0o777 == 0o600
        assert cp.secrets.injection("hf").env == {"HF_TOKEN": TOKEN}
    finally:
        if missing == "backend":
            keyring.set_keyring(previous)
    monkeypatch.setenv("FOUNDRY_SECRET_STORE", "vault")
    with pytest.raises(ConfigError, match="is not one of file, keyring"):
        ControlPlane()
