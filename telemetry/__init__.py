"""What SensorWatch's programs tell the ops team's Prometheus about themselves: each
program's /metrics endpoint (endpoint.py), the one credentials check of the dashboard and
/metrics (credentials.py), and the alert latency histogram both alert paths observe
(alert_latency.py)."""
