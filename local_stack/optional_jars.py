"""JVM jars that only object storage needs, not fetched by a plain ``scripts/setup``.

A laptop that never touches object storage should not download them:

- S3Proxy (40 MB), the first time ``scripts/s3-local`` starts. Its file name carries its
  version, so a file that is there is current; a changed pin fetches the new file.
- S3A, Hadoop's S3 connector (``hadoop-aws`` for pyspark's Hadoop, with the AWS SDK
  bundle it is built against: 550 MB), by ``scripts/setup --s3`` (this module run as a
  program; compose's ``s3a-jars`` service runs the same). A stamp records the Hadoop
  version they were resolved for. The job only looks for them (conf.jars.s3a_jars) and,
  without them, says to run that.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from conf import versions
from conf.cli import read_options
from conf.jars import JarsMissing, s3a_wanted
from conf.jars import s3a_jars as resolved_s3a_jars
from conf.paths import JARS_DIR, S3A_JARS_DIR, S3A_STAMP
from local_stack.jvm_jars import POM, _mvn, resolve, shipped_by_pyspark

S3PROXY_DIR = JARS_DIR / "s3proxy"
S3A_DIR = S3A_JARS_DIR


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


def s3a_jars() -> list[Path]:
    """The S3A connector's jars for pyspark's Hadoop (resolved when missing or stale)."""
    try:
        return resolved_s3a_jars()
    except JarsMissing:
        pass
    wanted = s3a_wanted()
    print(
        f"jars: resolving Hadoop {wanted['hadoop']}'s S3 connector (hadoop-aws and the AWS "
        "SDK bundle, about 550 MB) from Maven Central, once ...",
        file=sys.stderr,
        flush=True,
    )
    artifacts = resolve(
        "spark-s3", {"hadoop.version": wanted["hadoop"], "log4j.version": wanted["log4j"]}
    )
    # The folder's content, not the folder: in compose it is a volume's mount point.
    S3A_DIR.mkdir(parents=True, exist_ok=True)
    for old in S3A_DIR.iterdir():
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
    for artifact in artifacts:
        if shipped_by_pyspark(artifact):
            continue
        target = S3A_DIR / artifact.path.name
        try:  # a hard link: the bundle need not take its 550 MB twice
            os.link(artifact.path, target)
        except OSError:
            shutil.copy2(artifact.path, target)
    S3A_STAMP.write_text(json.dumps(wanted) + "\n", encoding="utf-8")
    return sorted(S3A_DIR.glob("*.jar"))


class S3aOptions(BaseModel):
    """The command line of ``python -m local_stack.optional_jars``: scripts/setup --s3, and
    the compose profile s3's s3a-jars service (into its volume)."""

    check: bool = Field(False, description="exit 1 unless the S3A jars are set up and current")


def main(argv: list[str] | None = None) -> int:
    """Resolve the S3A jars (``--check``: only say whether they are current)."""
    args = read_options(
        S3aOptions, argv, prog="python -m local_stack.optional_jars",
        description="Hadoop's S3 connector for pyspark's Hadoop, from Maven Central.",
        say_as="s3a jars",
    )  # fmt: skip
    if args.check:
        try:
            resolved_s3a_jars()
        except JarsMissing:
            return 1
        return 0
    jars = s3a_jars()
    print(f"jars: {len(jars)} S3A jars ready in {S3A_DIR}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
