"""Plain-text tables for the terminal (``scripts/alerts``, ``scripts/bench``): columns two
spaces apart, no borders, no trailing spaces.

Written here rather than taken from a library: tabulate and its kind size every column to
the widest cell of a whole table, with no minimum width, while ``scripts/alerts --follow``
prints each row as it arrives in columns sized before the first one (a longer value pushes
its row); and they pad a header's column two wider, which would move the benchmark tables.
"""

from __future__ import annotations

from collections.abc import Sequence

SEPARATOR = "  "


def line(cells: Sequence[str], widths: Sequence[int], right: bool = False) -> str:
    """One row: each cell padded to its column's width (left-aligned, or ``right``), the
    columns two spaces apart. A longer cell pushes the rest of its row."""
    padded = (
        cell.rjust(width) if right else cell.ljust(width)
        for cell, width in zip(cells, widths, strict=True)
    )
    return SEPARATOR.join(padded).rstrip()


def fitted(rows: Sequence[Sequence[str]], right: bool = False) -> list[str]:
    """The lines of a whole table (a header is just its first row), each column as wide as
    its widest cell."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [line(row, widths, right) for row in rows]
