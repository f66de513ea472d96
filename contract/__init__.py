"""What every part of SensorWatch shares, each defined once: the event
(docs/architecture.md#the-event), alerts and incidents, the rules file's format, the
device registry, devices' MQTT topics and time conversions."""
