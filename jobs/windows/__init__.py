"""Windows: the ``windows`` query streams ``readings``, deduplicates them into one-minute
panes and assembles the closed windows from them (docs/architecture.md#windows)."""
