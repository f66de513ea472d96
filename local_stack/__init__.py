"""The local stack a developer or CI runs without Docker, behind the entry points of
``scripts/``.

The servers (``server.py``: what every one shares; ``prometheus_project.py``: what
Alertmanager and Prometheus share): the Kafka broker (``kafka``), Mosquitto
(``mosquitto``), Alertmanager (``alertmanager``), Prometheus (``prometheus``) and S3Proxy
(``s3``), with their settings (``settings``) and TLS material (``tls``); run-local's ports
(``ports``); the standalone Spark cluster (``spark_cluster``); the compose profiles'
set-up (``compose_s3``, ``compose_mqtt``); what ``scripts/setup`` resolves: the jars
(``jvm_jars``, ``optional_jars``, with the Maven recipe in ``jvm/``), the driver's
class-data archive (``class_archive``) and the bridge's engine (``bridge_engine``); and
the clean-up of the JVMs' performance-data folder after set-up and tests
(``jvm_perfdata``).

Product code never imports it (tests/project/test_layout.py): a program only finds what
set-up resolved (conf/jars.py) and says which set-up to run when something is missing.
"""
