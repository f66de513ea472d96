"""Where a lake is (conf/lake_location.py) and how each library is pointed at it
(lake/storage.py): a folder or s3a://bucket/prefix, one spelling each, no secrets."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from conf.lake_location import is_object_store, join, load_credential_files, parse_lake
from conf.settings.base import SettingsError, load_settings
from conf.settings.job import JobSettings
from conf.settings.lake import LakeReaderSettings
from lake import storage


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("s3a://bucket/lake", "s3a://bucket/lake"),
        ("s3://bucket/lake/", "s3a://bucket/lake"),
        ("s3a://bucket", "s3a://bucket"),
        ("s3a://bucket//a/b//", "s3a://bucket/a/b"),
        ("/srv/lake", "/srv/lake"),
    ],
)
def test_a_lake_has_one_spelling(given: str, written: str) -> None:
    assert parse_lake(given) == written


def test_a_relative_folder_becomes_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)

    assert parse_lake("lake") == str(tmp_path / "lake")
    assert parse_lake(Path("lake")) == str(tmp_path / "lake")
    assert not is_object_store(parse_lake("lake"))


def test_paths_below_a_lake() -> None:
    assert join("s3a://b/lake", "readings", "_delta_log") == "s3a://b/lake/readings/_delta_log"
    assert join("/srv/lake", "_checkpoints", "ingest") == "/srv/lake/_checkpoints/ingest"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("gs://bucket/lake", "gs:// is not supported"),
        ("s3a:///lake", "s3a:// without a bucket"),
        ("s3a://bucket/lake?versionId=1", "no query"),
        ("s3a://AKIDEXAMPLE:very-secret@bucket/lake", "credentials do not belong"),
    ],
)
def test_a_bad_lake_is_refused_by_every_program_without_repeating_it(
    given: str, message: str
) -> None:
    for settings in (JobSettings, LakeReaderSettings):
        with pytest.raises(SettingsError) as refused:
            load_settings(settings, {"lake": given})

        text = str(refused.value)
        assert text.startswith("--lake (SENSORWATCH_LAKE): ") and message in text
        assert "very-secret" not in text and given not in text


def test_libraries_get_the_endpoint_but_never_the_credentials(monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret")
    lake = "s3a://bucket/lake"

    delta = storage.delta_options(lake)
    spark = storage.spark_conf(lake)
    filesystem, path = storage.filesystem(lake)

    assert delta == {
        "AWS_REGION": "eu-west-1",
        "conditional_put": "etag",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
    }
    assert spark["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert spark["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert spark["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert spark["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    for value in [*delta.values(), *spark.values()]:
        assert "very-secret" not in value and "AKIDEXAMPLE" not in value
    assert filesystem.type_name == "s3" and path == "bucket/lake"
    # A local lake needs none of it.
    assert storage.delta_options("/srv/lake") is None
    assert storage.spark_conf("/srv/lake") == {}
    assert storage.filesystem("/srv/lake")[0].type_name == "local"


@pytest.fixture
def no_aws(monkeypatch) -> pytest.MonkeyPatch:
    # Set, then removed: monkeypatch then also removes what the code under test sets.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        for variable in (name, f"{name}_FILE"):
            monkeypatch.setenv(variable, "")
            monkeypatch.delenv(variable)
    return monkeypatch


def test_credentials_come_from_files_named_by_the_file_variables(no_aws, tmp_path: Path) -> None:
    (tmp_path / "id").write_text("AKIDFROMFILE\n")
    (tmp_path / "secret").write_text("secret-from-file\n")
    no_aws.setenv("AWS_ACCESS_KEY_ID_FILE", str(tmp_path / "id"))
    no_aws.setenv("AWS_SECRET_ACCESS_KEY_FILE", str(tmp_path / "secret"))

    load_settings(JobSettings, {"lake": "s3a://bucket/lake"})

    assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIDFROMFILE"
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == "secret-from-file"
    assert "AWS_SESSION_TOKEN" not in os.environ


def test_a_variable_that_is_set_wins_over_its_file(no_aws, tmp_path: Path) -> None:
    (tmp_path / "id").write_text("AKIDFROMFILE")
    no_aws.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
    no_aws.setenv("AWS_ACCESS_KEY_ID_FILE", str(tmp_path / "id"))

    load_credential_files()

    assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIDFROMENV"


def test_a_local_lake_never_reads_credential_files(no_aws, tmp_path: Path) -> None:
    no_aws.setenv("AWS_SECRET_ACCESS_KEY_FILE", str(tmp_path / "missing"))

    load_settings(JobSettings, {"lake": str(tmp_path / "lake")})

    assert "AWS_SECRET_ACCESS_KEY" not in os.environ


@pytest.mark.parametrize("content", [None, "  \n"])
def test_an_unreadable_or_empty_credential_file_is_one_line_naming_it(
    no_aws, tmp_path: Path, content: str | None
) -> None:
    secret_file = tmp_path / "secret"
    if content is not None:
        secret_file.write_text(content)
    no_aws.setenv("AWS_SECRET_ACCESS_KEY_FILE", str(secret_file))

    with pytest.raises(SettingsError) as failure:
        load_settings(JobSettings, {"lake": "s3a://bucket/lake"})

    message = str(failure.value)
    assert len(message.splitlines()) == 1
    assert message.startswith("--lake (SENSORWATCH_LAKE): AWS_SECRET_ACCESS_KEY_FILE=")
    assert str(secret_file) in message
    assert "AWS_SECRET_ACCESS_KEY" not in os.environ


def test_jobs_started_at_once_on_one_new_lake_all_pass_its_write_check(tmp_path: Path) -> None:
    """The job's write check (jobs.driver.startup.check_lake) runs before the lease: two jobs
    started together on one lake both reach the lease, where one is refused with its
    holder's pid, instead of one failing on the other's deleted probe (a CI run met it)."""
    from jobs.driver.startup import check_lake

    lake, callers, rounds = tmp_path / "lake", 6, 150
    start, refusals = threading.Barrier(callers), []

    def checks() -> None:
        start.wait()
        for _ in range(rounds):
            try:
                check_lake(str(lake))
            except SettingsError as refused:
                refusals.append(str(refused))

    threads = [threading.Thread(target=checks) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert refusals == []
    assert list(lake.iterdir()) == []  # no probe left behind
