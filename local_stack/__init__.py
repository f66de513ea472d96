"""The local stack a developer or CI runs without Docker.

The broker (``kafka``), Alertmanager (``alertmanager``), Prometheus (``prometheus``), S3
(``s3``), TLS material (``tls``), process supervision (``process``), the standalone Spark
cluster (``spark_cluster``), the compose ``s3`` profile's credentials (``compose_s3``), and
what ``scripts/setup`` resolves: the jars (``jvm_jars``, ``optional_jars``, with the Maven
recipe in ``jvm/``) and the driver's class-data archive (``class_archive``); and the
clean-up of the JVMs' performance-data folder after set-up and tests (``jvm_perfdata``).
The shell entry points in ``scripts/`` run these modules.

Product code (jobs, ops, lake, conf, contract, producer, telemetry) never imports it: a
program only finds what set-up resolved (conf/paths.py) and says which set-up to run
when something is missing.
"""
