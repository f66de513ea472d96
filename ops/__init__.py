"""What people use, reading the lake without a JVM: ``scripts/alerts``
(``alerts_cli.py``), ``scripts/rules`` (``rules_cli.py``), the dashboard (``dashboard/``)
and the notifier that keeps Alertmanager in sync (``python -m ops.notify``)."""
