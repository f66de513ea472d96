"""What a kill leaves in a checkpoint (jobs/spark/checkpoints.py): files before the first batch,
a batch planned and not committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.spark.checkpoints import (
    clear_unfinished_start,
    concurrent_checkpoint_update,
    has_committed,
    uncommitted_batch,
)

# What Spark's checkpoint file manager leaves when killed between writing offsets/0's
# temporary file (and its checksum) and renaming it into place.
TEMPORARY = (".0.6f1c2a9e-4b7d-4e1a-9c55-0d3f1b2e7a10.tmp",
             "..0.6f1c2a9e-4b7d-4e1a-9c55-0d3f1b2e7a10.tmp.crc")  # fmt: skip


def checkpoint_with(
    tmp_path: Path, offsets: tuple[str, ...], commits: tuple[str, ...] = ()
) -> Path:
    root = tmp_path / "_checkpoints" / "windows"
    for folder, names in (("offsets", offsets), ("commits", commits)):
        (root / folder).mkdir(parents=True)
        for name in names:
            (root / folder / name).write_text("v1\n")
    (root / "metadata").write_text('{"id":"3c1d"}\n')
    return root


def test_a_start_killed_before_its_first_batch_leaves_nothing_behind(tmp_path) -> None:
    root = checkpoint_with(tmp_path, TEMPORARY)

    assert sorted(clear_unfinished_start(str(root))) == sorted(TEMPORARY)
    assert list((root / "offsets").iterdir()) == []
    assert (root / "metadata").exists()  # the query's id stays


def test_a_planned_batch_keeps_every_file(tmp_path) -> None:
    planned = ("0", ".0.crc", *TEMPORARY)
    root = checkpoint_with(tmp_path, planned)

    assert clear_unfinished_start(str(root)) == []
    assert sorted(p.name for p in (root / "offsets").iterdir()) == sorted(planned)


def test_a_commit_without_offsets_is_left_for_spark_to_judge(tmp_path) -> None:
    root = checkpoint_with(tmp_path, TEMPORARY, commits=("0",))

    assert clear_unfinished_start(str(root)) == []
    assert sorted(p.name for p in (root / "offsets").iterdir()) == sorted(TEMPORARY)


def test_a_new_checkpoint_has_nothing_to_clear(tmp_path) -> None:
    assert clear_unfinished_start(str(tmp_path / "_checkpoints" / "ingest")) == []


def test_a_batch_planned_and_not_committed_is_found(tmp_path) -> None:
    root = checkpoint_with(tmp_path, ("0", ".0.crc", "1", ".1.crc", "2", ".2.crc"), ("0", "1"))
    assert uncommitted_batch(str(root)) == 2


def test_every_batch_committed_or_none_planned_leaves_none(tmp_path) -> None:
    assert uncommitted_batch(str(checkpoint_with(tmp_path / "a", ("0", "1"), ("0", "1")))) is None
    assert uncommitted_batch(str(checkpoint_with(tmp_path / "b", TEMPORARY))) is None
    assert uncommitted_batch(str(tmp_path / "new")) is None
    only_planned = checkpoint_with(tmp_path / "c", ("0", ".0.crc"))
    assert uncommitted_batch(str(only_planned)) == 0


def test_only_a_commit_means_a_completed_batch(tmp_path) -> None:
    assert has_committed(str(checkpoint_with(tmp_path / "a", ("0", "1"), ("0",))))
    assert not has_committed(str(checkpoint_with(tmp_path / "b", ("0", ".0.crc"))))
    assert not has_committed(str(tmp_path / "new"))


@pytest.mark.parametrize(
    "error",
    [
        # The offset log (Spark's error class), and a rename onto an existing file.
        "[CONCURRENT_STREAM_LOG_UPDATE] Concurrent update to the log. Multiple streaming jobs "
        "detected for 12.",
        "org.apache.hadoop.fs.FileAlreadyExistsException: rename destination exists",
        # The commit log: the message alone, as a standby's windows query failed in CI.
        "Multiple streaming queries are concurrently using "
        "file:/tmp/lake/_checkpoints/windows/commits.",
    ],
)
def test_another_run_s_checkpoint_entry_is_told_apart(error: str) -> None:
    """What the job restarts a query for after a takeover (jobs/driver/job.py), and only that."""
    assert concurrent_checkpoint_update(error)
    assert not concurrent_checkpoint_update("Multiple streaming queries ran fine")
