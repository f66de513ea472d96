"""The command line of every program, made by pydantic-settings from its settings class.

A program's flags are the fields of one model (its settings class, or a subclass adding
the program's own options): ``--<name>`` each (``late_fraction`` -> ``--late-fraction``),
with the field's description, default and environment variable in ``--help``. Parsing
yields the flags as given, as text; the values are validated with the settings
(``conf.settings.load_settings``), so a bad flag and a bad variable get the same message.
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, CliSettingsSource

from conf.settings.base import SECRET_SETTINGS, SettingsError, invalid

M = TypeVar("M", bound=BaseModel)

# A switch given alone means true (``--standby``); a value still works (``--standby false``).
_SWITCH = {"nargs": "?", "const": "true", "metavar": "BOOL"}
# How pydantic-settings names a field's type where it has no choices: shown as X.
_TYPE_NAMES = {"str", "int", "float", "Path", "SecretStr", "datetime", "none"}
_ENV_NOTE = re.compile(r"\s*\[env: [^]]*\]$")


def _flag_adder(options: frozenset[str]) -> Callable[..., Any]:
    """pydantic-settings' add_argument, our way: ``options`` are the program's own
    flags, not settings (no environment variable)."""

    def add_flag(parser: Any, *names: str, **kwargs: Any) -> Any:
        dest = kwargs.get("dest")
        if dest in SECRET_SETTINGS:
            return None  # never a flag (which `ps` shows): environment or _FILE only
        if dest in options and isinstance(kwargs.get("help"), str):
            kwargs["help"] = _ENV_NOTE.sub("", kwargs["help"])
        metavar = str(kwargs.get("metavar", ""))
        if metavar == "bool":
            kwargs.update(_SWITCH)
        elif metavar and names[0].startswith("-"):  # a positional keeps its name
            # pydantic writes {a,b,null} for a choice, {str,null} for an optional value.
            bare = metavar.replace("{", "").replace("}", "")
            names_ = [n for n in bare.split(",") if n not in ("null", "none")]
            # A generic type (list[Path], tuple[int,...]) is no choice either.
            choice = (
                metavar.startswith("{") and "[" not in metavar and not set(names_) <= _TYPE_NAMES
            )
            kwargs["metavar"] = "{" + ",".join(names_) + "}" if choice else "X"
        return parser.add_argument(*names, **kwargs)

    return add_flag


def _paragraphs(text: str) -> str:
    """Each paragraph filled to the terminal's usual width (the help keeps line breaks)."""
    return "\n\n".join(textwrap.fill(" ".join(p.split()), 88) for p in text.split("\n\n"))


def read_command_line(
    settings: type[BaseSettings] | None,
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
    options: type[M] | None = None,
    flags: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], M | None]:
    """The settings given as flags in ``argv`` (None: the process's), by field name and as
    given (``load_settings`` validates them with the environment and the file), and the
    program's own ``options`` (a model of flags that are not settings), validated.

    ``--help`` prints every flag and exits 0; an unknown flag prints the usage and exits 2
    (the usual convention). ``flags`` are other spellings, by field, also named in
    messages: ``{"notify_interval": "--interval"}`` accepts ``--interval`` besides
    ``--notify-interval``.

    Raises:
        SettingsError: a bad value of an option, one line per flag.
    """
    # The help's description is the model's docstring (pydantic-settings parses at once).
    bases = tuple(m for m in (settings or BaseSettings, options) if m is not None)
    model = type(f"{bases[-1].__name__}Flags", bases, {"__doc__": _paragraphs(description)})
    source = CliSettingsSource(
        model,
        cli_prog_name=prog,
        cli_parse_args=list(sys.argv[1:] if argv is None else argv),
        cli_kebab_case=True,
        cli_show_env_vars=True,
        cli_shortcuts={k.replace("_", "-"): v.lstrip("-") for k, v in (flags or {}).items()},
        add_argument_method=_flag_adder(
            frozenset(options.model_fields) if options else frozenset()
        ),
    )
    given = dict(source())
    values = {k: v for k, v in given.items() if settings and k in settings.model_fields}
    if options is None:
        return values, None
    # A field's flag is its alias where it has one (--json for json_lines).
    names = set(options.model_fields) | {f.alias for f in options.model_fields.values() if f.alias}
    try:
        return values, options.model_validate({k: v for k, v in given.items() if k in names})
    except ValidationError as exc:
        raise invalid(exc, flags, settings=False) from None


def read_options(
    options: type[M],
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
    say_as: str | None = None,
) -> M:
    """A tool's own command line, which takes no settings: its ``options`` (a model of
    flags), validated (see :func:`read_command_line`). With ``say_as``, a bad value is
    said as ``<say_as>: <what>`` and the tool exits 2, as for an unknown flag.

    Raises:
        SettingsError: a bad value of an option, one line per flag (without ``say_as``).
    """
    try:
        _, found = read_command_line(
            None, argv, prog=prog, description=description, options=options
        )
    except SettingsError as exc:
        if say_as is None:
            raise
        print(f"{say_as}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    assert found is not None
    return found


def whole_lines(*streams: TextIO) -> None:
    """Write each line of ``streams`` (default: stdout and stderr) in one piece, at its
    end.

    Unbuffered (``PYTHONUNBUFFERED=1``, common in containers and CI), ``print`` writes
    the text and its newline apart: beside other programs on one terminal or pipe
    (scripts/run-local), their lines landed inside each other's.
    """
    for stream in streams or (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)
