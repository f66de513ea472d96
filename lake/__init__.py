"""The lake as storage, for every reader of it that is not Spark: the job's driver, the
ops view (``scripts/alerts``, the dashboard) and the notifier. No pyspark here."""
