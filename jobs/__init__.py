"""The streaming job, ``python -m jobs.stream``: Kafka -> parse -> windows -> rules ->
Delta, plus the real-time alert path (docs/architecture.md#where-each-step-lives).

Its rooms, from the bottom up (docs/architecture.md#the-layers): ``spark/`` (Spark as the
job runs it) and ``metrics.py`` (its Prometheus metrics); ``writer/`` (the tables' schemas, data
files and commits); ``ingest/`` and ``windows/`` (each stage's pure transformations);
``alerting/`` (the rules, alerts and incidents); ``queries/`` (the streaming queries that
wire them); ``realtime/`` (the real-time query's supervisor); ``driver/`` (start, watch,
recover, stop); ``stream.py`` (the command) and ``python_daemon.py`` (its Python workers).
"""
