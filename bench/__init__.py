"""``scripts/bench``: SensorWatch's benchmarks (docs/architecture.md#performance-targets).

One run measures, against a local broker it starts itself and on the same topic, the
producer's messages/s, a plain consumer's read rate (the ceiling for any reader), the
job's end-to-end rows/s with and without the queries that read the readings table, the
overheat alert latency at a steady rate, the job's peak memory, and how rows/s scale
with partitions and sensors; and, by mode, the bridge, a soak, the anomaly rules'
detection and their learned state. Modules:

- ``plan``: what a quick and a full run measure (sizes);
- ``stats``: percentiles and rates (pure);
- ``env``, ``processes``, ``run_dir``: the broker, topics, the programs as processes,
  memory sampling, progress capture, a run's folder;
- ``measure``: one function per figure; ``first_alert``, ``scale_out``: two of them;
- ``bridge`` and ``mqtt_devices`` (the devices, bench/devices/ in Go): MQTT -> bridge ->
  Kafka;
- ``soak``: a long steady run;
- ``anomaly``, ``anomaly_score``, ``recordings``, ``rule_sets``: the rules' detection on
  labelled recordings; ``learned_state``: the learned baselines' cost;
- ``report`` and ``plot``: ``figures.json``, the printed table, ``figures.png``;
- ``__main__``: the command line.
"""
