"""A Spark schema as Arrow's: what delta-rs and the local (Arrow) DataFrames take."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType


def arrow_schema(schema: StructType) -> pa.Schema:
    """A table's schema as Arrow (timestamps as UTC instants), for delta-rs."""
    # Spark 4.2 no longer assumes UTC for a timestamp's Arrow type: it must be named.
    return to_arrow_schema(schema, timezone="UTC")
