"""Ray 2.60's token authentication, switched on before Ray is imported: Ray reads
``RAY_AUTH_MODE`` once, at import, so setting it later (as a client that finds a token on disk
must) has no effect. This module imports nothing of Ray."""

from __future__ import annotations

import os
from pathlib import Path


def token_available() -> bool:
    """A token at hand: ``RAY_AUTH_TOKEN``, or the file ``RAY_AUTH_TOKEN_PATH`` or
    ``~/.ray/auth_token`` names (where ``ray start --head`` writes it)."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token"
    return Path(path).is_file()


def use_token_if_present(address: str | None) -> bool:
    """For an existing cluster (``address``) with ``RAY_AUTH_MODE`` unset and a token at hand,
    set ``RAY_AUTH_MODE=token`` (what `ray start` did on the head). Returns whether it did."""
    if address and "RAY_AUTH_MODE" not in os.environ and token_available():
        os.environ["RAY_AUTH_MODE"] = "token"
        return True
    return False
