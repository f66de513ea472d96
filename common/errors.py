"""How every program says a failure in its own one-line messages."""

from __future__ import annotations


def first_line(error: BaseException | None) -> str:
    """The first line of ``error``'s message (its type's name when it has none): the
    libraries' messages run to pages (a Java stack, a Rust debug dump)."""
    text = str(error).strip() if error is not None else ""
    return text.splitlines()[0] if text else type(error).__name__
