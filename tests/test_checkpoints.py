"""Clearing what a kill left in a checkpoint before its first batch (jobs/checkpoints.py)."""

from __future__ import annotations

from pathlib import Path

from jobs.checkpoints import clear_unfinished_start

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
