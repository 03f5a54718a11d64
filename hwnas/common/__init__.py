"""Small pieces every hwnas package shares: registries, errors that name rule/value/fix, provenance.

Nothing here imports torch at module level beyond what provenance needs, and nothing here imports
another hwnas package, so every package may depend on ``common``.
"""

from hwnas.common.errors import ConfigError, HwnasError, format_problems
from hwnas.common.registry import Registry

__all__ = ["ConfigError", "HwnasError", "Registry", "format_problems"]
