"""What can be built: search spaces, their architecture strings and model builders (timm).

Each space is registered by name (``@register_space``) and owns one short arch-string grammar,
documented in its class docstring, with ``encode(decode(s)) == s``. The arch string is the trial
attribute, the cache key, the log id and the export folder name. Spaces build plain digital
``nn.Module``s and never import aihwkit: hardware models are applied from outside (``analog``).
"""

from search_spaces.base import (
    SPACES,
    ArchError,
    SearchSpace,
    get_space,
    list_spaces,
    register_space,
)

# Importing the modules registers the spaces.
from search_spaces import mbconv, nb201, resnet, vit  # noqa: E402,F401  isort: skip

__all__ = ["SPACES", "ArchError", "SearchSpace", "get_space", "list_spaces", "register_space"]
