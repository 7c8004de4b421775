"""Whether a new instance's sshd answers: a TCP connection to port 22 that sends an SSH banner
(an open port alone is not enough: cloud load balancers and half-booted images accept and hang)."""

from __future__ import annotations

import socket


def ssh_answers(addr: str, port: int = 22, timeout: float = 3.0) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(8).startswith(b"SSH-")
    except OSError:
        return False
