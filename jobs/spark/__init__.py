"""Spark as the job runs it: the one place a SparkSession is built (``spark_session.py``),
its scratch folder (``scratch.py``), its JVM's stderr as the job shows it
(``jvm_stderr.py``), small driver-side tables as DataFrames (``local_frames.py``), the
queries' checkpoints (``checkpoints.py``), SQL handed to the JVM as text (``sql_text.py``),
a schema as Arrow's (``arrow_schema.py``) and stopping a query between two micro-batches
(``batch_gate.py``). The daemon that forks its Python workers imports the whole job, so
it sits at the top: jobs/python_daemon.py."""
