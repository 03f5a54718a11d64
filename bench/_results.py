"""Shared by the bench scripts: write one bench's section into a shared results file."""

from __future__ import annotations

from pathlib import Path


def replace_section(path: Path, name: str, text: str) -> None:
    """Put ``text`` between this bench's markers in the shared results file, so several benches
    can update one file without overwriting each other's sections."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    old = path.read_text() if path.exists() else ""
    block = f"{start}\n{text}\n{end}"
    if start in old and end in old:
        new = old[:old.index(start)] + block + old[old.index(end) + len(end):]
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)


def publish(text: str, out: str | Path | None) -> None:
    """Print a bench's report and, when ``out`` is given, write it there too."""
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text if text.endswith("\n") else text + "\n")


def cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "" if value is None else str(value).replace("|", "\\|")  # NB201 archs hold pipes


def markdown(rows: list[dict[str, object]]) -> str:
    """A markdown table; the columns are the union of the rows' keys, in order of appearance."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)
