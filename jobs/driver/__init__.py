"""The job's driver program behind ``python -m jobs.stream``: what it checks and takes
before its queries start (``startup.py``), the running job that starts, watches,
recovers and stops them (``job.py``), what a failed query means for it (``recovery.py``:
the failure that stops the job, or why the query restarts on its checkpoint), the
readiness probe (``ready.py``) and the lines of a clean stop (``summary.py``)."""
