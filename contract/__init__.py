"""The contracts every part of SensorWatch shares (docs/architecture.md#the-event)."""
