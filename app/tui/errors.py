"""Errors as the CLI prints them: the FoundryError message, then its hint (never a traceback)."""

from __future__ import annotations


def one_line(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    message = getattr(error, "message", None)
    if message is not None:
        hint = getattr(error, "hint", None)
        return f"{message}\nhint: {hint}" if hint else str(message)
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
