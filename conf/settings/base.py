"""The settings machinery every program's settings are built on (docs/streaming-job.md#settings).

Each setting has a default in its program's module, can be set in a settings file (the
job's ``--config``, by default ``conf/pipeline.toml``), overridden by an environment
variable ``SENSORWATCH_<NAME>`` and by a command-line flag ``--<name>`` (flags win;
conf/cli.py makes each program's flags from its settings class). A bad value stops the
program with a message that names both the flag and the variable.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from conf.paths import PROJECT_ROOT, RULES_FILE
from conf.secrets import secret_from_file

ENV_PREFIX = "SENSORWATCH_"


class SettingsError(ValueError):
    """Settings failed validation; ``str()`` lists one problem per line."""


# Settings whose rejected value an error must not repeat: a lake URI may carry a user's
# credentials (refused, and not to be printed either); its messages say what is wrong.
_UNECHOED = frozenset({"lake"})


@dataclass(frozen=True)
class SettingsFile:
    """A settings file (TOML) for :func:`load_settings`: the job's own (``--config``,
    every setting in it must be one of the job's), or, ``shared``, the job's file read by
    another program, which takes the settings it shares with the job (nothing when the
    file does not exist)."""

    path: Path
    shared: bool = False


class SettingsFileSource(TomlConfigSettingsSource):
    """pydantic-settings' TOML source, with the file's tables only grouping settings
    (``[kafka]`` ``bootstrap_servers = ...`` sets ``bootstrap_servers``) and the mistakes
    a file can hold refused in one line each: unreadable, not TOML, an unknown setting, a
    secret, a setting the rules file took over.

    Raises:
        SettingsError: the file holds one of those mistakes.
    """

    def __init__(self, settings_cls: type[BaseSettings], file: SettingsFile) -> None:
        self.file = file
        self.settings_cls = settings_cls
        if not file.shared:
            try:
                file.path.open("rb").close()  # missing: the source would skip it
            except OSError as exc:
                raise SettingsError(f"--config: cannot read {file.path}: {exc.strerror}") from None
        super().__init__(settings_cls, toml_file=file.path)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        path = self.file.path
        try:
            data = super()._read_file(file_path)
        except OSError as exc:
            raise SettingsError(f"--config: cannot read {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"--config: {path} is not valid TOML: {exc}") from None
        flat: dict[str, Any] = {}
        for key, value in data.items():
            flat.update(value if isinstance(value, dict) else {key: value})
        known = self.settings_cls.model_fields
        if "rules" in self.settings_cls.model_fields:  # reads a rules file
            for name in MOVED_TO_RULES.keys() & flat.keys():
                raise SettingsError(f"settings file: {name} is {_moved(name)}")
        if self.file.shared:  # another program's file: what this one shares with it
            flat = {k: v for k, v in flat.items() if k in known}
        unknown = sorted(flat.keys() - known.keys())
        if unknown:
            raise SettingsError(f"settings file: unknown setting(s) {', '.join(unknown)}")
        for name in sorted(SECRET_SETTINGS & flat.keys()):
            raise SettingsError(
                f"settings file: {name} is a secret: set {env_name(name)} or "
                f"{env_name(name)}_FILE (a file holding it) instead"
            )
        return flat


# The settings file of the load_settings call under way (pydantic-settings builds the
# sources inside the class's constructor).
_SETTINGS_FILE: ContextVar[SettingsFile | None] = ContextVar("settings_file", default=None)


class ProgramSettings(BaseSettings):
    """Precedence, highest first: flags, environment, settings file, defaults."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    # Settings that mean something only together (a user and its password, a certificate
    # and its key), by what they are for: some given without the others is refused.
    GIVEN_TOGETHER: ClassVar[dict[str, tuple[str, ...]]] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        file = _SETTINGS_FILE.get()
        if file is None:
            return (init_settings, env_settings)
        return (init_settings, env_settings, SettingsFileSource(settings_cls, file))

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name in SECRET_SETTINGS & set(cls.model_fields):
            if data.get(name) is not None or os.environ.get(env_name(name)):
                continue
            secret = secret_from_file(env_name(name) + "_FILE")
            if secret is not None:
                data[name] = secret
        return data

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        # A group names settings unset (None) by default: a misspelt name or another
        # default would make the group always given, or fail at every start.
        for names in vars(cls).get("GIVEN_TOGETHER", {}).values():
            for name in names:
                field = cls.model_fields.get(name)
                if field is None or field.default is not None or field.default_factory:
                    raise TypeError(
                        f"{cls.__name__}.GIVEN_TOGETHER: {name} is not a setting of "
                        f"{cls.__name__} unset by default"
                    )

    @model_validator(mode="after")
    def _given_together(self) -> Any:
        # Each class of the settings (a program's settings combine several) names its own.
        for klass in type(self).__mro__:
            for what, names in vars(klass).get("GIVEN_TOGETHER", {}).items():
                given = [getattr(self, name) is not None for name in names]
                if any(given) and not all(given):
                    said = [
                        f"{env_name(name)} (or _FILE)" if name in SECRET_SETTINGS else name
                        for name in names
                    ]
                    needs = (
                        " and ".join(said) if len(said) == 2
                        else f"all of {', '.join(said[:-1])} and {said[-1]}"
                    )  # fmt: skip
                    raise ValueError(f"{what} needs {'both ' * (len(said) == 2)}{needs}")
        return self


# Settings that hold a secret: read from SENSORWATCH_<NAME> or from the file named by
# SENSORWATCH_<NAME>_FILE, never from a flag (which `ps` shows) or a settings file, and
# never shown (pydantic's SecretStr prints as stars).
SECRET_SETTINGS = frozenset(
    {
        "kafka_sasl_password", "kafka_ssl_key_password", "alertmanager_password",
        "dashboard_token", "dashboard_password", "mqtt_password",
    }
)  # fmt: skip


# The job's settings file; the ops view reads the settings it shares with the job from it
# (the lake, the thresholds), so a lake or threshold set there is seen by both.
PIPELINE_CONFIG = PROJECT_ROOT / "conf" / "pipeline.toml"
# The job's settings file as the programs that read its lake take it: what they share.
SHARED_FILE = SettingsFile(PIPELINE_CONFIG, shared=True)


S = TypeVar("S", bound=BaseModel)


def flag_name(field: str) -> str:
    """The command-line flag of a setting: ``late_fraction`` -> ``--late-fraction``."""
    return "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    """The environment variable of a setting: ``late_fraction`` -> ``SENSORWATCH_LATE_FRACTION``."""
    return ENV_PREFIX + field.upper()


# Settings the rules file took over (docs/alerting.md): where each one went.
MOVED_TO_RULES = {
    "critical_temp_c": "overheat_reading's threshold",
    "warning_temp_c": "sustained_high's threshold",
    "sustained_min_readings": "sustained_high's min_readings",
    "silence_timeout": "sensor_silent's after",
    "incident_hold": "each rule's resolve_after",
}


def _moved(name: str) -> str:
    """Where a setting the rules file took over went, as the end of a sentence."""
    return (
        f"now {MOVED_TO_RULES[name]} in the rules file ({RULES_FILE.name} by default, "
        "--rules; docs/alerting.md)"
    )


def load_settings(
    cls: type[S],
    overrides: dict[str, Any],
    settings_file: SettingsFile | None = None,
    flags: dict[str, str] | None = None,
) -> S:
    """Build ``cls`` from defaults, a settings file, environment and ``overrides`` (flags;
    None = not given), in rising precedence. ``flags`` names a setting's flag where it is
    not ``--<name>`` (the dashboard's ``dashboard_port`` is ``--port``).

    Raises:
        SettingsError: one line per invalid setting, naming its flag and variable.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    if "rules" in cls.model_fields:  # a rules file's reader: refused rather than ignored
        for name in MOVED_TO_RULES:
            if os.environ.get(env_name(name)) is not None:
                raise SettingsError(f"{env_name(name)}: {name} is {_moved(name)}")
    token = _SETTINGS_FILE.set(settings_file)
    try:
        return cls(**given)
    except ValidationError as exc:
        raise invalid(exc, flags) from None
    finally:
        _SETTINGS_FILE.reset(token)


def invalid(
    exc: ValidationError, flags: Mapping[str, str] | None = None, settings: bool = True
) -> SettingsError:
    """A validation failure as one line per field, naming its flag (``flags`` where it is
    not ``--<name>``), with its variable for a ``settings`` field, and the value given
    unless the message says it already or it must not be repeated."""
    lines = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        message = error["msg"].removeprefix("Value error, ")
        if not field:
            lines.append(message)
            continue
        got = error.get("input")
        flag = (flags or {}).get(field) or flag_name(field)
        if settings:
            flag += f" ({env_name(field)})"
        echo = not isinstance(got, dict) and field not in _UNECHOED and repr(got) not in message
        lines.append(f"{flag}: {message} (got {got!r})" if echo else f"{flag}: {message}")
    return SettingsError("\n".join(lines))
