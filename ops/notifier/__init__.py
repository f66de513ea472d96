"""The notifier behind ``python -m ops.notify`` (the command: ops/notify.py): it keeps a
Prometheus Alertmanager in sync with the incidents table, so that people are paged once
per episode and the page ends when the episode does (docs/alerting.md).

``loop.py``: each sync reads the incidents from the lake and posts them; ``alert_stream.py``:
the fast lane, each real-time alert posted as it arrives; ``incident_alerts.py``: incidents
as the alerts Alertmanager takes (pure); ``state.py``: what it remembers across a restart;
``metrics.py``: its Prometheus metrics.
"""
