"""Ingest: the readings topic as a Spark source (``source.py``) and each record parsed and
validated into ``readings`` or ``quarantine`` (``parse.py``); the ``ingest`` query that
wires them is jobs/queries/ingest.py (docs/architecture.md#ingest)."""
