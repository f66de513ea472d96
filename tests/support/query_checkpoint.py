"""A lake whose query has a checkpoint, as Spark leaves it: for tests of the writers that
take their application id and batch times from the checkpoint (jobs/writer/delta_io.py)."""

from __future__ import annotations

import json
from pathlib import Path

from lake.layout import Lake


def lake_with_checkpoint(root: Path, query: str, checkpoint_id: str) -> Lake:
    """A lake under ``root`` whose ``query`` has a checkpoint with the id ``checkpoint_id``."""
    lake = Lake(root)
    folder = Path(lake.checkpoint(query))
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    (folder / "metadata").write_text(json.dumps({"id": checkpoint_id}) + "\n", encoding="utf-8")
    return lake


def log_offsets(lake: Lake, query: str, batch_id: int) -> None:
    """What Spark does before it runs a batch: log its offsets."""
    (Path(lake.checkpoint(query)) / "offsets" / str(batch_id)).write_text("v1\n")
