"""Windows: ``readings`` as a streaming source (``source.py``), deduplicated into one-minute
panes and the closed windows assembled from them (``panes.py``); the ``windows`` query that
wires them is jobs/queries/windows.py (docs/architecture.md#windows)."""
