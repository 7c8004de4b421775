"""The OpenSSH client, one command per call: argv construction, host-key pinning, error mapping.

Host keys: without `known_hosts` the cluster's own file (its state folder) pins each host's key the
first time Foundry connects (StrictHostKeyChecking=accept-new) and every later connection must
present the same key; with `known_hosts` only the keys given there are accepted (=yes). A key that
changed is a clear error, never a silent re-pin. The private key is a 0600 file in the cluster's
state folder (ssh reads keys from files only); it never travels on argv or in a message.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from pathlib import Path

from foundry.plugins.atomic_files import atomic_write
from foundry.plugins.errors import CredentialsError, ProviderError

from .config import Host, SshConfig

UNREACHABLE_EXIT = 255   # ssh's own failures (connect, auth, host key); the remote command's code otherwise


class HostUnreachable(ProviderError):
    """ssh could not reach the host. `definite`: the host itself is not there (connection refused, no
    route, the TCP connect timed out); otherwise it may only be slow (sshd did not send its banner in
    time on a loaded machine, or the command did not finish): no evidence that the job is gone."""

    def __init__(self, message: str, hint: str | None = None, definite: bool = False):
        super().__init__(message, hint)
        self.definite = definite


_GONE = ("Connection refused", "No route to host", "Network is unreachable", "Host is down")


def materialize_key(state_dir: Path, key: bytes) -> Path:
    """The private key as a 0600 file ssh can read, rewritten only when its content changed."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / f"id-{hashlib.sha256(key).hexdigest()[:12]}"
    if not path.exists():
        atomic_write(path, key.rstrip(b"\n") + b"\n", mode=0o600)
    return path


class SshClient:
    def __init__(self, config: SshConfig, key_file: str, state_dir: Path):
        self.config, self.key_file, self.state_dir = config, key_file, state_dir

    @property
    def known_hosts(self) -> str:
        if self.config.known_hosts:
            return str(Path(self.config.known_hosts).expanduser())
        return str(self.state_dir / "known_hosts")

    def argv(self, host: Host, command: str) -> list[str]:
        strict = "yes" if self.config.known_hosts else "accept-new"
        argv = ["ssh", "-i", self.key_file, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", f"StrictHostKeyChecking={strict}", "-o", "HashKnownHosts=no", "-o", "CheckHostIP=no",
                "-o", f"ConnectTimeout={self.config.connect_timeout}", "-o", "ServerAliveInterval=5",
                "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR", "-p", str(host.port)]
        for opt in self.config.ssh_options:
            argv += ["-o", opt]
        if host.user:
            argv += ["-l", host.user]
        return [*argv, host.addr, command]

    def run(self, host: Host, argv: list[str], *, stdin: bytes | None = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess:
        """`argv` on `host` (quoted for its shell). HostUnreachable when ssh itself failed to connect."""
        return self.shell(host, shlex.join(argv), stdin=stdin, timeout=timeout, check=check)

    def shell(self, host: Host, command: str, *, stdin: bytes | None = None, timeout: float = 120,
              check: bool = True) -> subprocess.CompletedProcess:
        if not self.config.known_hosts:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            proc = subprocess.run(self.argv(host, command), input=stdin if stdin is not None else b"",
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HostUnreachable(f"ssh {host}: no answer in {timeout:.0f} s",
                                  hint="is the host up and its sshd running?") from None
        except FileNotFoundError:
            raise ProviderError("the ssh client is not installed", hint="apt-get install openssh-client") from None
        if proc.returncode == UNREACHABLE_EXIT:
            raise ssh_error(host, proc.stderr.decode(errors="replace"), self.known_hosts)
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise ProviderError(f"ssh {host}: `{command[:80]}` exited {proc.returncode}: {err[-1] if err else ''}")
        return proc


def ssh_error(host: Host, stderr: str, known_hosts: str) -> ProviderError:
    """ssh's exit 255, as what the user should do about it."""
    text = stderr.strip()
    last = text.splitlines()[-1] if text else "ssh failed"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "Host key verification failed" in text:
        return CredentialsError(
            f"ssh {host}: its host key is not the one pinned in {known_hosts}",
            hint=f"if the host was reinstalled on purpose, remove its line ({host.known_hosts_name}) from "
                 f"{known_hosts}; otherwise someone may be in between")
    if "Permission denied" in text or "Too many authentication failures" in text:
        return CredentialsError(f"ssh {host}: the key was refused ({last})",
                                hint="add the secret's public key to the host's ~/.ssh/authorized_keys")
    definite = any(m in text for m in _GONE) or ("Connection timed out" in text and "banner exchange" not in text)
    return HostUnreachable(f"ssh {host}: {last}", hint="is the host up and its sshd running?", definite=definite)
