"""The lake writer: the tables, written once per micro-batch as data files from the
executors committed by the driver (docs/architecture.md#the-lake-writer), and kept healthy
while the job runs (docs/architecture.md#table-maintenance)."""
