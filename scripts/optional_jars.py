"""JVM jars fetched from Maven Central on first use, not by ``scripts/setup``.

A laptop that never touches object storage should not download S3Proxy (40 MB): it is
fetched the first time ``scripts/s3-local`` starts. Each artifact's file name carries
its version, so a file that is there is current; a changed pin fetches the new file.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from conf import versions
from conf.paths import JARS_DIR
from scripts.jvm_jars import POM, _mvn

S3PROXY_DIR = JARS_DIR / "s3proxy"


def fetch(group: str, name: str, version: str, classifier: str, dest: Path) -> Path:
    """One artifact (no dependencies) copied from Maven Central into ``dest``; returns
    its file. A file already there is kept."""
    suffix = f"-{classifier}" if classifier else ""
    target = dest / f"{name}-{version}{suffix}.jar"
    if target.is_file():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    coordinate = f"{group}:{name}:{version}:jar" + (f":{classifier}" if classifier else "")
    print(f"jars: fetching {coordinate} from Maven Central ...", file=sys.stderr, flush=True)
    # Into a temporary folder first: an interrupted download never looks current.
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        _mvn(
            "-f", str(POM),
            "dependency:copy",
            f"-Dartifact={coordinate}",
            f"-DoutputDirectory={tmp}",
        )  # fmt: skip
        Path(tmp, target.name).replace(target)
    return target


def s3proxy_jar() -> Path:
    """S3Proxy's self-contained jar for the pinned S3PROXY_VERSION (fetched if missing)."""
    return fetch(
        "org.gaul", "s3proxy", versions.s3proxy_version(), "jar-with-dependencies", S3PROXY_DIR
    )
