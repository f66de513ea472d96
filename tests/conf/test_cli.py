"""Every program's command line, made from its settings class (conf/cli.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from conf.cli import read_command_line, whole_lines
from conf.settings.base import SECRET_SETTINGS, SettingsError, load_settings
from conf.settings.job import JobSettings
from conf.settings.notifier import NotifierSettings


class Options(BaseModel):
    """A program's own flags, beside its settings."""

    config: Path = Field(Path("conf/pipeline.toml"), description="settings file")
    limit: int = Field(50, ge=0, description="rows")


def read(argv: list[str], **kwargs: object) -> tuple[dict[str, object], Options | None]:
    return read_command_line(
        JobSettings, argv, prog="prog", description="A program.", options=Options, **kwargs
    )


def test_flags_come_back_as_given_and_validate_with_the_settings() -> None:
    flags, options = read(["--lake", "/x", "--trigger", "5 seconds", "--config", "a.toml"])

    assert flags == {"lake": "/x", "trigger": "5 seconds"}
    assert options == Options(config=Path("a.toml"))
    settings = load_settings(JobSettings, flags)
    assert (settings.lake, settings.trigger) == ("/x", "5 seconds")


def test_a_switch_alone_means_true_and_takes_a_value_too() -> None:
    assert read(["--standby"])[0] == {"standby": "true"}
    assert read(["--standby", "false", "--realtime"])[0] == {
        "standby": "false",
        "realtime": "true",
    }
    assert load_settings(JobSettings, read(["--standby"])[0]).standby is True


def test_a_cap_or_a_retention_is_turned_off_by_off() -> None:
    flags, _ = read(["--max-offsets-per-trigger", "off", "--raw-retention", "off"])
    settings = load_settings(JobSettings, flags)
    assert (settings.max_offsets_per_trigger, settings.raw_retention) == (None, None)
    assert load_settings(JobSettings, {}).max_offsets_per_trigger == 250_000


def test_an_option_out_of_range_names_its_flag() -> None:
    with pytest.raises(SettingsError, match=r"^--limit: .*greater than or equal to 0 \(got '-3'\)"):
        read(["--limit", "-3"])


def test_shortcuts_are_other_spellings_of_one_flag() -> None:
    flags, _ = read_command_line(
        NotifierSettings,
        ["--interval", "3", "--once"],
        prog="prog",
        description="d",
        flags={"notify_interval": "--interval", "notify_once": "--once"},
    )

    assert flags == {"notify_interval": "3", "notify_once": "true"}


@pytest.mark.parametrize("secret", sorted(SECRET_SETTINGS & set(JobSettings.model_fields)))
def test_no_secret_is_a_flag(secret: str, capsys: pytest.CaptureFixture[str]) -> None:
    flag = "--" + secret.replace("_", "-")
    with pytest.raises(SystemExit) as refused:
        read([flag, "hunter2"])

    assert refused.value.code == 2
    assert f"unrecognized arguments: {flag}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        read(["--help"])
    assert flag not in capsys.readouterr().out


def test_help_lists_each_flag_with_its_default_and_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as shown:
        read(["--help"])
    out = capsys.readouterr().out

    assert shown.value.code == 0
    assert out.startswith("usage: prog ") and "A program." in out
    assert "--watermark-delay X" in out and "SENSORWATCH_WATERMARK_DELAY" in out
    assert "--standby [BOOL]" in out
    # The program's own options are not settings: no variable is named for them.
    assert "SENSORWATCH_CONFIG" not in out and "SENSORWATCH_LIMIT" not in out


def test_an_unknown_flag_exits_2_with_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        read(["--late-fraction", "0.3"])  # the producer's, not the job's

    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: prog") and "unrecognized arguments: --late-fraction" in err


class Writes(io.RawIOBase):
    """A file that records each write it is given (one per system call)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        self.writes.append(bytes(data))
        return len(data)


def test_each_line_is_written_in_one_piece_also_unbuffered() -> None:
    # As PYTHONUNBUFFERED=1 makes stdout and stderr: print's text and newline went
    # apart, and another program's line landed between them (run-local's terminal).
    raw = Writes()
    stream = io.TextIOWrapper(raw, encoding="utf-8", line_buffering=True, write_through=True)
    whole_lines(stream)
    print("ops.dashboard: lake /srv/lake, http://127.0.0.1:8080/", file=stream)
    print("two", "parts", file=stream, flush=True)
    assert raw.writes == [
        b"ops.dashboard: lake /srv/lake, http://127.0.0.1:8080/\n",
        b"two parts\n",
    ]
