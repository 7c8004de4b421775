"""An `s3` secret's values from AWS-style files, as mcli reads them (and as R2's docs write them):

    ~/.aws/credentials                          ~/.aws/config
    [default]                                   [default]                 ([profile NAME] for others)
    aws_access_key_id = ...                     region = auto
    aws_secret_access_key = ...                 endpoint_url = https://ACCOUNT.r2.cloudflarestorage.com
                                                s3 =                      (or nested under s3)
                                                  endpoint_url = https://...

Errors name the file, the profile and the key, never a value.
"""

from __future__ import annotations

import configparser
from pathlib import Path

from foundry.plugins.errors import ConfigError


def _read(path: str | Path, what: str) -> configparser.RawConfigParser:
    path = Path(path).expanduser()
    parser = configparser.RawConfigParser()
    try:
        with open(path, encoding="utf-8") as fh:
            parser.read_file(fh)
    except FileNotFoundError:
        raise ConfigError(f"{what} file {str(path)!r} does not exist") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} file {str(path)!r} is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {exc.strerror}") from None
    except configparser.Error as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        raise ConfigError(f"{what} file {str(path)!r} is not an AWS-style INI file{where}") from None
    return parser


def _nested(value: str) -> dict[str, str]:
    """`s3 =` followed by indented `key = value` lines."""
    out = {}
    for line in value.splitlines():
        key, sep, val = line.partition("=")
        if sep:
            out[key.strip()] = val.strip()
    return out


def s3_values_from_aws_files(config_file: str | Path | None, credentials_file: str | Path | None,
                             profile: str = "default") -> dict[str, str]:
    """The s3 secret's fields (access_key_id, secret_access_key, endpoint, region) from the files."""
    values: dict[str, str] = {}
    if credentials_file:
        creds = _read(credentials_file, "credentials")
        if not creds.has_section(profile):
            raise ConfigError(f"credentials file {str(credentials_file)!r} has no [{profile}] profile",
                              hint="pick one with --profile")
        for field, key in (("access_key_id", "aws_access_key_id"), ("secret_access_key", "aws_secret_access_key")):
            if creds.has_option(profile, key):
                values[field] = creds.get(profile, key).strip()
        if creds.has_option(profile, "aws_session_token"):
            raise ConfigError(f"credentials file profile [{profile}] has aws_session_token: temporary credentials "
                              "expire during a run", hint="use a long-lived access key (R2: an API token's key pair)")
    if config_file:
        cfg = _read(config_file, "config")
        section = profile if profile == "default" else f"profile {profile}"
        if not cfg.has_section(section):
            raise ConfigError(f"config file {str(config_file)!r} has no [{section}] section",
                              hint="pick one with --profile")
        if cfg.has_option(section, "region"):
            values["region"] = cfg.get(section, "region").strip()
        endpoint = cfg.get(section, "endpoint_url", fallback="").strip()
        if not endpoint and cfg.has_option(section, "s3"):
            endpoint = _nested(cfg.get(section, "s3")).get("endpoint_url", "")
        if endpoint:
            values["endpoint"] = endpoint
        for field, key in (("access_key_id", "aws_access_key_id"), ("secret_access_key", "aws_secret_access_key")):
            if field not in values and cfg.has_option(section, key):   # keys may live in config too
                values[field] = cfg.get(section, key).strip()
    missing = [k for k in ("access_key_id", "secret_access_key") if not values.get(k)]
    if missing:
        raise ConfigError(f"the AWS files give no {' or '.join('aws_' + k for k in missing)} for profile [{profile}]",
                          hint="give --credentials-file (and --profile)")
    return values
