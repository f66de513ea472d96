"""scripts/s3-local: a real S3-compatible server (S3Proxy) per data dir, on loopback."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyarrow import fs

from conf.paths import PROJECT_ROOT
from local_stack import s3 as local_s3
from local_stack.s3 import S3Error, S3Server
from local_stack.server import free_port

CLI = str(PROJECT_ROOT / "scripts" / "s3-local")


def s3_local_cli(*args: str | Path, wrapper: bool = False) -> subprocess.CompletedProcess:
    """Run the command: through its bash wrapper (which runs scripts/setup first) or
    straight through the venv's Python."""
    command = [CLI] if wrapper else [str(PROJECT_ROOT / ".venv/bin/python"), "-m",
                                      "local_stack.s3"]  # fmt: skip
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    data_dir = tmp_path_factory.mktemp("s3")
    started = local_s3.start(data_dir, free_port(), buckets=("lake", "other"))
    yield started
    local_s3.stop(data_dir)


def s3fs(server: S3Server, secret: str | None = None) -> fs.S3FileSystem:
    creds = server.credentials
    return fs.S3FileSystem(
        access_key=creds.access_key,
        secret_key=secret if secret is not None else creds.secret_key,
        endpoint_override=server.endpoint,
        region=local_s3.REGION,
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1),
    )


def delta_options(server: S3Server) -> dict[str, str]:
    env = server.environment()
    return {
        "AWS_ENDPOINT_URL": env["AWS_ENDPOINT_URL"],
        "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
        "AWS_REGION": env["AWS_REGION"],
        "AWS_ALLOW_HTTP": "true",
        "conditional_put": "etag",
    }


@pytest.mark.jvm  # S3Proxy, a Java server
def test_objects_round_trip_with_signed_requests_only(server: S3Server) -> None:
    store = s3fs(server)
    with store.open_output_stream("lake/a/b.txt") as out:
        out.write(b"reading")

    with store.open_input_stream("lake/a/b.txt") as got:
        assert got.read() == b"reading"
    listed = store.get_file_info(fs.FileSelector("lake", recursive=True))
    assert [(i.path, i.size) for i in listed if i.is_file] == [("lake/a/b.txt", 7)]
    # A wrong secret is refused: the server checks signatures.
    with pytest.raises(OSError, match="ACCESS_DENIED"):
        s3fs(server, secret="not-the-secret").open_input_stream("lake/a/b.txt").read()


@pytest.mark.jvm  # S3Proxy, a Java server
def test_delta_commits_race_safely(server: S3Server) -> None:
    # delta-rs commits version N by writing its log file only if absent (If-None-Match:
    # *): two writers that both saw version 0 must end with two commits, not one lost.
    uri, options = "s3://other/race", delta_options(server)
    rows = pa.table({"x": pa.array([1, 2, 3], pa.int64())})
    write_deltalake(uri, rows, storage_options=options)
    first, second = (
        DeltaTable(uri, storage_options=options),
        DeltaTable(uri, storage_options=options),
    )

    write_deltalake(first, rows, mode="append")
    write_deltalake(second, rows, mode="append")  # stale: version 1 exists already

    table = DeltaTable(uri, storage_options=options)
    assert table.version() == 2
    assert table.to_pyarrow_table().num_rows == 9


@pytest.mark.jvm  # S3Proxy, a Java server
def test_cli_start_status_env_stop(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "s3", free_port()
    try:
        started = s3_local_cli("start", "--data-dir", data_dir, "--port", port, wrapper=True)

        assert started.returncode == 0, started.stderr
        endpoint = f"http://127.0.0.1:{port}"
        assert started.stdout.strip().splitlines()[-1] == f"endpoint={endpoint}"
        assert (data_dir / "buckets" / "sensorwatch").is_dir()
        secret = json.loads((data_dir / "credentials.json").read_text())["secret_key"]
        assert (data_dir / "credentials.json").stat().st_mode & 0o077 == 0
        assert (data_dir / "s3proxy.properties").stat().st_mode & 0o077 == 0
        pid = json.loads((data_dir / "s3proxy.json").read_text())["pid"]
        # Java listens on an IPv6 socket: loopback shows as IPv4-mapped.
        listening = {
            c.laddr.ip.removeprefix("::ffff:")
            for c in psutil.Process(pid).net_connections("tcp")
            if c.status == "LISTEN"
        }
        assert listening == {"127.0.0.1"}

        status = s3_local_cli("status", "--data-dir", data_dir)
        assert status.returncode == 0 and f"endpoint={endpoint}" in status.stdout
        env = s3_local_cli("env", "--data-dir", data_dir)
        assert env.returncode == 0
        assert f"export AWS_ENDPOINT_URL={endpoint}" in env.stdout.splitlines()
        assert f"export AWS_SECRET_ACCESS_KEY={secret}" in env.stdout.splitlines()
        # The secret is printed by `env` only: never by start or status, never logged.
        for text in (started.stdout, started.stderr, status.stdout, status.stderr):
            assert secret not in text
        assert secret not in (data_dir / "s3proxy.log").read_text()

        again = s3_local_cli("start", "--data-dir", data_dir, "--port", port)
        assert again.returncode == 0, again.stderr
        assert json.loads((data_dir / "s3proxy.json").read_text())["pid"] == pid
    finally:
        stopped = s3_local_cli("stop", "--data-dir", data_dir)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    after = s3_local_cli("status", "--data-dir", data_dir)
    assert after.returncode == 1 and "stopped" in after.stdout


@pytest.mark.jvm  # S3Proxy, a Java server
def test_a_bad_bucket_name_or_a_taken_port_is_a_clear_error(
    tmp_path: Path, server: S3Server
) -> None:
    with pytest.raises(S3Error, match="bucket name 'Bad_Name' is not valid"):
        local_s3.start(tmp_path / "a", free_port(), buckets=("Bad_Name",))
    taken = s3_local_cli("start", "--data-dir", tmp_path / "b", "--port", server.port)
    assert taken.returncode == 2
    assert taken.stderr.strip() == (
        f"s3-local: port {server.port} on 127.0.0.1 is already in use; choose another --port"
    )


def test_the_compose_profile_s3_makes_its_credentials_once(tmp_path: Path) -> None:
    """local_stack/compose_s3.py (the s3-init service, then each service's environment):
    random credentials kept across restarts, private files, S3Proxy listening for the
    compose network on the volume's folder, the bucket made."""
    from local_stack import compose_s3

    config, data = tmp_path / "config", tmp_path / "data"
    compose_s3.init(config, data)
    first = compose_s3.environment(config)
    compose_s3.init(config, data)  # a second `up`

    assert compose_s3.environment(config) == first
    assert first["SENSORWATCH_LAKE"] == f"s3a://{compose_s3.BUCKET}/lake"
    assert first["AWS_ENDPOINT_URL"] == compose_s3.ENDPOINT
    assert len(first["AWS_SECRET_ACCESS_KEY"]) >= 24
    assert (data / compose_s3.BUCKET).is_dir()
    properties = (config / "s3proxy.properties").read_text()
    assert f"s3proxy.endpoint={compose_s3.LISTEN}\n" in properties
    assert f"jclouds.filesystem.basedir={compose_s3.SERVICE_BASEDIR}\n" in properties
    assert f"s3proxy.credential={first['AWS_SECRET_ACCESS_KEY']}\n" in properties
    for secret in ("s3proxy.properties", "credentials.json"):
        assert (config / secret).stat().st_mode & 0o777 == 0o600, secret


def test_compose_s3_init_in_a_volume_it_cannot_write_says_what_to_do(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A volume prepared as root by an older release: one line naming the folder and the
    way out, exit 2, nothing written."""
    from local_stack import compose_s3

    volume = tmp_path / "volume"
    volume.mkdir()
    volume.chmod(0o555)
    if os.geteuid() == 0:
        # Root may write anywhere; the app's user in the container may not.
        monkeypatch.setattr(compose_s3.os, "access", lambda path, mode: False)
    monkeypatch.setattr(compose_s3, "CONFIG_DIR", volume)
    monkeypatch.setattr(compose_s3, "DATA_DIR", volume)

    assert compose_s3.main(["init"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"compose-s3: {volume} is not writable by this user (uid {os.getuid()}): the volume "
        "was made by an older release that prepared it as root; remove it once with "
        "`docker compose --profile s3 down -v` (the bucket's data goes with it)"
    ]
    assert list(volume.iterdir()) == []


def test_compose_s3_env_without_init_is_one_clear_line(tmp_path: Path, monkeypatch, capsys) -> None:
    from local_stack import compose_s3

    monkeypatch.setattr(compose_s3, "CONFIG_DIR", tmp_path / "nothing")

    assert compose_s3.main(["env"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        f"compose-s3: no credentials in {tmp_path / 'nothing'}: did s3-init run?"
    ]
