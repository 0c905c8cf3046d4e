"""bench/RESULTS.md: the sections a benchmark writes under its "History", the head kept as written by hand."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "RESULTS.md"


def write_sections(results: Path, text: str) -> None:
    """Write ``text``'s ``## `` sections into ``results``, replacing sections of the same title where they stand
    and adding new ones at the end (each benchmark owns its sections of RESULTS.md). The file's head, its
    "Current figures" and the heading of its "History", stays as written by hand: the run says which rows of
    "Current figures" to bring up to date."""
    def split(document: str) -> tuple[str, dict[str, str]]:
        head, *sections = document.split("\n## ")
        return head, {s.split("\n", 1)[0]: "## " + s.rstrip("\n") for s in sections}

    head, old = split(results.read_text()) if results.exists() else ("# Benchmark results", {})
    _, new = split("\n" + text.lstrip("\n"))
    results.write_text("\n\n".join([head.strip(), *{**old, **new}.values()]) + "\n")
    print(f"{results.name}: wrote the section(s) {', '.join(repr(t) for t in new)}; bring their rows of "
          "\"Current figures\" at its top up to date")
