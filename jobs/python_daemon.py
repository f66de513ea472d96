"""The daemon that forks Spark's Python workers for the job (``spark.python.daemon.module``).

PySpark's own daemon forks a worker before anything is imported, and every worker then
imports, on its own, what the job's Arrow tasks need (pyarrow, pydantic, the project's
modules): some 105 MB of private memory per worker, with four to six workers alive at
5,000 readings/s (docs/benchmarks.md, "Memory at 5,000 readings/s"). This daemon
imports all of it once, before it forks, so the workers share those pages with it
instead of each holding a copy.
``gc.freeze()`` keeps the collector from writing to (and so copying) the shared objects.
"""

from __future__ import annotations

import gc

import pyarrow.compute
import pyarrow.parquet  # noqa: F401 (imported to be shared, not used here)
import pyspark.worker  # noqa: F401 (imported to be shared, not used here)
from pyspark import daemon

# What the workers of the job's tasks import when they unpickle them: the Arrow tasks of
# ingest (and the data-file writer they share with the readers) and the learned rules.
import jobs.alerting.learned_rules
import jobs.queries.ingest
import jobs.writer.data_files  # noqa: F401 (imported to be shared, not used here)

if __name__ == "__main__":
    gc.freeze()
    daemon.manager()
