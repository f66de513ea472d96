"""The job's driver program behind ``python -m jobs.stream``: what it checks and takes
before its queries start (``startup.py``), and the running job that starts, watches,
recovers and stops them (``job.py``)."""
