"""Every registered search space's size and grammar head: what ``hwnas spaces list`` prints,
as the BENCHMARKS.md section ``search_space_sizes``. Sizes are counted, not sampled (each
space's ``size()``), so the section needs no timing and no idle host.

    python -m bench.search.sizes
"""

from __future__ import annotations

import math

from bench import RESULTS, command_line
from search_spaces import get_space, list_spaces
from search_spaces.stats import size_text


def table() -> str:
    rows = ["| space | archs | log10 | grammar |", "|---|---|---|---|"]
    for name in list_spaces():
        space = get_space(name)
        n = space.size()
        rows.append(f"| {name} | {size_text(n)} | {math.log10(n):.2f} | "
                    f"{space.grammar().splitlines()[0]} |")
    return "\n".join(rows)


def main() -> None:
    text = "\n".join([
        "## Search-space sizes (search_space_sizes)", "",
        f"`{command_line()}` (the sizes `hwnas spaces list` prints; counted exactly by each "
        "space's `size()`, conditional choices included).", "", table(), ""])
    (RESULTS / "search_space_sizes.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
