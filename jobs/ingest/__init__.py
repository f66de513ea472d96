"""Ingest: the ``ingest`` query reads Kafka, parses and validates each record into
``readings`` or ``quarantine`` (docs/architecture.md#ingest)."""
