"""What SensorWatch's programs tell the ops team's Prometheus about themselves: each
program's /metrics endpoint (endpoint.py) behind the dashboard's credentials check
(credentials.py)."""
