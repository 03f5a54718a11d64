"""Ray 2.60's token authentication, switched on before Ray is imported: Ray reads
``RAY_AUTH_MODE`` once, at import, so setting it later (as a client that finds a token on disk
must) has no effect. This module imports nothing of Ray."""

from __future__ import annotations

import os
from pathlib import Path


def token_file() -> Path:
    """``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token`` (where `ray get-auth-token --generate`
    writes it)."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def token_available() -> bool:
    """A token at hand: ``RAY_AUTH_TOKEN``, or the file ``token_file`` names."""
    return bool(os.environ.get("RAY_AUTH_TOKEN")) or token_file().is_file()


def token_source() -> str:
    """Where this client's token comes from, for an error message (never the token itself)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = token_file()
    return str(path) if path.is_file() else f"none (no RAY_AUTH_TOKEN, no {path})"


def use_token_if_present(address: str | None) -> bool:
    """For an existing cluster (``address``) with ``RAY_AUTH_MODE`` unset and a token at hand,
    set ``RAY_AUTH_MODE=token`` (what `ray start` did on the head). Returns whether it did."""
    if address and "RAY_AUTH_MODE" not in os.environ and token_available():
        os.environ["RAY_AUTH_MODE"] = "token"
        return True
    return False
