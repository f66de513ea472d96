"""Typed settings for SensorWatch's programs, validated at start-up: one module per program
beside the shared pieces (docs/streaming-job.md#settings).

- ``base.py``: the machinery (sources and their precedence, the settings file, one line
  per invalid setting); ``values.py``: value types several programs share;
- what programs share: ``kafka_connection.py``, ``mqtt_connection.py``, ``lake.py``,
  ``rules_file.py``, ``metrics_endpoint.py``, ``alertmanager_client.py``;
- one module per program: ``job.py``, ``producer.py``, ``replay.py``, ``bridge.py``,
  ``notifier.py``, ``dashboard.py``, ``alerts_cli.py``.

The local servers' settings are theirs: local_stack/settings.py.
"""
