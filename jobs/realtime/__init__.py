"""The real-time path: the ``realtime`` query puts an alert per hot reading on
``sensor-alerts`` within milliseconds (docs/architecture.md#the-real-time-path)."""
