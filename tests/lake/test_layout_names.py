"""The lake's table names are defined once (lake/layout.py), and they are the tables the
job defines (jobs/writer/tables.py keys its schemas by them)."""

from __future__ import annotations

from jobs.writer.tables import INTERNAL_TABLES, TABLES
from lake import layout


def test_the_names_are_the_tables_the_job_defines() -> None:
    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)}
    assert names == set(TABLES) | set(INTERNAL_TABLES)
    assert layout.BASELINES in INTERNAL_TABLES  # the dashboard draws a sensor's band from it
