"""The job's streaming queries, each wiring the pure transformations of its stage
(``jobs/ingest``, ``jobs/windows``), the rules (``jobs/alerting``) and the writers
(``jobs/writer``): ``ingest.py``, ``windows.py``, ``realtime.py``; ``context.py``, what
they share, and ``registry_cache.py``, the device registry as they hold it."""
