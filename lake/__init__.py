"""The lake as storage: its layout, every table's name and a checkpoint per query
(``layout.py``), how each library opens it (``storage.py``), the one reader without a JVM
(``reader.py``: the job's driver, the ops view, the notifier) and the one-writer lease
(``lease.py``). No pyspark here: the Spark schemas are jobs/writer/tables.py."""
