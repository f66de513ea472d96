"""The real-time path: the ``realtime`` query (jobs/queries/realtime.py) puts an alert per
hot reading on ``sensor-alerts`` within milliseconds; ``path.py`` supervises it,
``topic_watch.py`` watches its topics (docs/architecture.md#the-real-time-path)."""
