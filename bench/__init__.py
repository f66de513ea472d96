"""``scripts/bench``: SensorWatch's benchmarks (docs/architecture.md#performance-targets).

One run measures, against a local broker it starts itself and on the same topic, the
producer's messages/s, a plain consumer's read rate (the ceiling for any reader), the
job's end-to-end rows/s with and without the queries that read the readings table, the
overheat alert latency at a steady rate, the job's peak memory, and how rows/s scale
with partitions and sensors. Modules:

- ``plan``: what a quick and a full run measure (sizes);
- ``stats``: percentiles and rates (pure);
- ``env``: the broker, topics, the producer process, memory sampling, progress capture;
- ``measure``: one function per figure;
- ``report`` and ``plot``: ``figures.json``, the printed table, ``figures.png``;
- ``__main__``: the command line.
"""
