"""The ops view: read the lake without a JVM (``scripts/alerts``, the dashboard)."""
