"""How each library reaches the lake (conf/lake_location.py says where it is).

Spark and delta-rs open a lake's URI as it is; pyarrow's file system (the executors' data
files, checkpoint reads) gets the bucket path. The credentials (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, or any other source of the AWS default
chains) are read from the environment by each library itself, so they never enter a
setting, a Spark configuration or a log line.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from obstore.exceptions import BaseError
from pyarrow import fs

from conf.lake_location import SCHEME, endpoint, is_object_store, region

# What the libraries raise when the lake's store cannot be reached or written (a full
# disk, an outage): Python's and pyarrow's OSError, obstore's own errors.
STORAGE_ERRORS = (OSError, BaseError)
# How every library says that the disk holding a lake is full (errno 28, ENOSPC).
NO_SPACE = "No space left on device"


# How the libraries say that an object store did not answer: obstore/delta-rs (Rust's
# reqwest) and Hadoop's S3A (the AWS SDK).
UNREACHABLE = re.compile(
    r"Connection refused|error sending request|Unable to execute HTTP request"
    r"|Connect timed out|connect timed out|UnknownHostException|Connection reset"
)


def store_unreachable(error_text: str) -> bool:
    """True when an error says the lake's object store did not answer."""
    return bool(UNREACHABLE.search(error_text))


def storage_full(error_text: str) -> bool:
    """True when an error says the lake's disk is full."""
    return NO_SPACE in error_text


def delta_options(location: str | Path) -> dict[str, str] | None:
    """delta-rs storage options for ``location`` (None for a local path)."""
    if not is_object_store(location):
        return None
    options = {
        "AWS_REGION": region(),
        # A commit writes its log entry only if no other writer made that version first
        # (If-None-Match: *): safe without a lock service, on S3 and S3-compatible stores.
        "conditional_put": "etag",
    }
    url = endpoint()
    if url:
        options["AWS_ENDPOINT_URL"] = url
        options["AWS_ALLOW_HTTP"] = str(url.startswith("http://")).lower()
    return options


def delta_table(location: str | Path, version: int | None = None) -> DeltaTable:
    """The Delta table at ``location`` (a path or URI), opened with its storage options."""
    return DeltaTable(str(location), version=version, storage_options=delta_options(location))


def is_delta_table(location: str | Path) -> bool:
    """True when a Delta table exists at ``location``."""
    return DeltaTable.is_deltatable(str(location), storage_options=delta_options(location))


def filesystem(location: str | Path) -> tuple[fs.FileSystem, str]:
    """The pyarrow file system ``location`` lives in, and its path within it."""
    text = str(location)
    if not is_object_store(text):
        return fs.LocalFileSystem(), text
    url = endpoint()
    options: dict[str, object] = {"region": region()}
    if url:
        parts = urlsplit(url)
        options["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
        options["scheme"] = parts.scheme or "https"
    return fs.S3FileSystem(**options), text.removeprefix(f"{SCHEME}://")


def read_text(location: str | Path) -> str:
    """A (small) file's text, from a local path or an object store URI.

    Raises:
        FileNotFoundError: there is no such file.
    """
    filesystem_, path = filesystem(location)
    with filesystem_.open_input_stream(path) as stream:
        return stream.read().decode("utf-8")


def is_folder(location: str | Path) -> bool:
    """True when ``location`` is a folder (in an object store: a prefix with objects)."""
    filesystem_, path = filesystem(location)
    return filesystem_.get_file_info(path).type == fs.FileType.Directory


def list_names(location: str | Path) -> list[str]:
    """The names of the files and folders directly below ``location`` (none when it
    does not exist)."""
    filesystem_, path = filesystem(location)
    selector = fs.FileSelector(path, allow_not_found=True)
    return [info.base_name for info in filesystem_.get_file_info(selector)]


def delete_file(location: str | Path) -> None:
    """Delete the file at ``location`` (a local path or an object store URI)."""
    filesystem_, path = filesystem(location)
    filesystem_.delete_file(path)


def spark_conf(location: str | Path) -> dict[str, str]:
    """Spark settings for Hadoop's S3 connector to reach ``location`` (nothing for a local
    path); the jars are :func:`local_stack.optional_jars.s3a_jars`. No credentials: S3A reads
    them from the environment of each JVM (its default provider chain)."""
    if not is_object_store(location):
        return {}
    conf = {
        "spark.hadoop.fs.s3a.endpoint.region": region(),
        # Checkpoint files through Hadoop's FileSystem API: the default (FileContext)
        # first checks that the parent folder exists, which on an object store means
        # reading a directory marker back, and S3-compatible stores differ there (S3Proxy
        # 2.6 answers a marker's name without the slash as a file). Neither API renames
        # atomically on S3; the checkpoint's single writer (the job) is what keeps it whole.
        # S3Proxy's filesystem backend answers a directory marker (`x/`) as the file `x`
        # and lists it as a child of itself. Hadoop 3.5's S3A (Spark 4.2) then refuses to
        # make a checkpoint folder whose marker exists ("... since it is a file"): mkdir
        # in performance mode does not probe for that. And Spark 4.2's start-up check that
        # a new checkpoint's offsets folder is empty finds the marker in it: off for a lake
        # on object storage only (WIP: is there a narrower fix? see issue 34's note).
        "spark.hadoop.fs.s3a.performance.flags": "mkdir",
        "spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart": "false",
        "spark.sql.streaming.checkpointFileManagerClass": (
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
        ),
    }
    url = endpoint()
    if url:
        conf["spark.hadoop.fs.s3a.endpoint"] = url
        # A private endpoint serves buckets under its own name, not as subdomains.
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(url.startswith("https")).lower()
    return conf


def table_rows(path: str) -> int:
    """Rows of the Delta table at ``path`` from its log's file statistics (0 when the
    table does not exist); a file without the statistic is counted from its footer."""
    if not is_delta_table(path):
        return 0
    table = delta_table(path)
    counts = pa.table(table.get_add_actions(flatten=True))["num_records"]
    if counts.null_count == 0:
        return int(pc.sum(counts).as_py() or 0)
    return sum(pq.ParquetFile(uri).metadata.num_rows for uri in table.file_uris())
