"""Built-in secret types, contributed through `register_secret_types` like any plugin's.

Files are injected under /foundry/secrets/NAME/ (providers mount them there, or relocate them and
rewrite the variables that point at them, as the local provider does).
"""

from __future__ import annotations

import re

from foundry.plugins.hookspecs import hookimpl
from foundry.plugins.secrets import SecretField, SecretInjection, SecretType

MOUNT_ROOT = "/foundry/secrets"


def _dir(name: str) -> str:
    return f"{MOUNT_ROOT}/{name}"


def _s3(name: str, v: dict[str, str]) -> SecretInjection:
    env = {"AWS_ACCESS_KEY_ID": v["access_key_id"], "AWS_SECRET_ACCESS_KEY": v["secret_access_key"]}
    if v.get("endpoint"):
        env["S3_ENDPOINT_URL"] = v["endpoint"]
    if v.get("region"):
        env["AWS_DEFAULT_REGION"] = v["region"]
    return SecretInjection(env=env)


def _gcp(name: str, v: dict[str, str]) -> SecretInjection:
    path = f"{_dir(name)}/credentials.json"
    env = {"GOOGLE_APPLICATION_CREDENTIALS": path}
    if v.get("project"):
        env["GOOGLE_CLOUD_PROJECT"] = v["project"]
    return SecretInjection(env=env, files={path: v["credentials"].encode()})


def _oci(name: str, v: dict[str, str]) -> SecretInjection:
    key_path = f"{_dir(name)}/key.pem"
    config = re.sub(r"(?m)^(\s*key_file\s*=).*$", rf"\1{key_path}", v["config"])
    cfg_path = f"{_dir(name)}/config"
    env = {"OCI_CONFIG_FILE": cfg_path, "OCI_CLI_CONFIG_FILE": cfg_path}
    return SecretInjection(env=env, files={cfg_path: config.encode(), key_path: v["key"].encode()})


def _env(name: str, v: dict[str, str]) -> SecretInjection:
    return SecretInjection(env={v["key"]: v["value"]})


def _kubeconfig(name: str, v: dict[str, str]) -> SecretInjection:
    path = f"{_dir(name)}/kubeconfig"
    return SecretInjection(env={"KUBECONFIG": path}, files={path: v["kubeconfig"].encode()})


def _ssh(name: str, v: dict[str, str]) -> SecretInjection:
    path = f"{_dir(name)}/id_key"
    cmd = f"ssh -i {path} -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new"
    return SecretInjection(env={"GIT_SSH_COMMAND": cmd, "FOUNDRY_SSH_KEY": path},
                           files={path: v["private_key"].rstrip("\n").encode() + b"\n"})


SECRET_TYPES = (
    SecretType("s3", "S3 or an S3-compatible store (Cloudflare R2, SeaweedFS, MinIO: give --endpoint)", (
        SecretField("access_key_id", "access key id"),
        SecretField("secret_access_key", "secret access key"),
        SecretField("endpoint", "endpoint URL (R2: https://ACCOUNT.r2.cloudflarestorage.com)", required=False, secret=False),
        SecretField("region", "region", required=False, secret=False),
    ), _s3),
    SecretType("gcp", "a Google Cloud service-account key (JSON file)", (
        SecretField("credentials", "path to the service-account JSON key", from_file=True),
        SecretField("project", "project id", required=False, secret=False),
    ), _gcp),
    SecretType("oci", "an Oracle Cloud API key: ~/.oci/config and its private key", (
        SecretField("config", "path to the OCI config file", from_file=True),
        SecretField("key", "path to the API private key (PEM)", from_file=True),
    ), _oci),
    SecretType("env", "one environment variable", (
        SecretField("key", "variable name", secret=False),
        SecretField("value", "variable value"),
    ), _env),
    SecretType("kubeconfig", "a kubeconfig file (KUBECONFIG)", (
        SecretField("kubeconfig", "path to the kubeconfig", from_file=True),
    ), _kubeconfig),
    SecretType("ssh", "an SSH private key (git clones over SSH)", (
        SecretField("private_key", "path to the private key", from_file=True),
    ), _ssh),
)


@hookimpl
def register_secret_types(register):
    for stype in SECRET_TYPES:
        register(stype.kind, stype)
