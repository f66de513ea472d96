"""create_tables: every table of the contract, readable by Spark with its schema."""

from __future__ import annotations

from deltalake import DeltaTable

from jobs.writer.tables import CHECKPOINT_INTERVAL, INTERNAL_TABLES, TABLES, create_tables
from lake.layout import Lake


def test_every_table_is_created_once_with_its_schema(spark, tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    create_tables(lake)  # idempotent: nothing is created twice
    for name, schema in {**TABLES, **INTERNAL_TABLES}.items():
        table = DeltaTable(lake.table(name))
        assert table.version() == 0, name
        config = table.metadata().configuration
        assert config["delta.checkpointInterval"] == str(CHECKPOINT_INTERVAL), name
        assert spark.read.format("delta").load(lake.table(name)).schema == schema, name
