"""The bridge, ``python -m bridge``: device readings from an MQTT broker into Kafka, at
least once (docs/devices.md).

One concept a module: ``records.py`` (an MQTT message as the Kafka record it becomes),
``acks.py`` (what was received and not yet acknowledged, in order), ``mqtt_in.py`` (the
MQTT session), ``kafka_out.py`` (the Kafka producer), ``metrics.py`` (its /metrics),
``service.py`` (the three wired together: a message is acknowledged to MQTT only after
Kafka confirmed it), ``cli.py`` (settings, signals, what it says).
"""
