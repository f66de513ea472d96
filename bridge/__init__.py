"""The bridge, ``python -m bridge``: device readings from an MQTT broker into Kafka, at
least once (docs/devices.md).

Two parts: the engine (``engine/``, a Go program: the MQTT session, the Kafka producer and
the book of acknowledgements, so that a message is acknowledged to MQTT only after Kafka
confirmed it), and this package around it: ``engine.py`` (the engine's configuration and
process), ``metrics.py`` (its /metrics, from the engine's counts), ``service.py`` (what
the engine reports, worded: outages said once), ``cli.py`` (settings, signals, the first
and last lines).
"""
