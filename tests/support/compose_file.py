"""docker-compose.yml and the Dockerfile as data, read the way Docker Compose reads them.

Only what the static checks need: ``.env`` parsing, ``${VAR}`` interpolation with the
``:-``, ``-``, ``:?`` and ``?`` forms, nested defaults and ``$$`` escapes, and the
Dockerfile's instructions.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conf.paths import PROJECT_ROOT

COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yml"
DOTENV = PROJECT_ROOT / ".env"
DOCKERFILE = PROJECT_ROOT / "Dockerfile"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def read_dotenv(path: Path = DOTENV) -> dict[str, str]:
    """KEY=VALUE lines; comments, blank lines and surrounding quotes dropped."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f".env: not KEY=VALUE: {line!r}"
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key.strip()] = value
    return values


@dataclass
class Interpolation:
    """Interpolates strings against an environment and records what it met."""

    env: dict[str, str]

    def __post_init__(self) -> None:
        self.used: set[str] = set()
        self.without_default: set[str] = set()

    def __call__(self, text: str) -> str:
        out, i = [], 0
        while i < len(text):
            if text[i] != "$":
                out.append(text[i])
                i += 1
            elif text.startswith("$$", i):  # "$$" is a literal dollar
                out.append("$")
                i += 2
            elif text.startswith("${", i):
                end = _closing_brace(text, i + 2)
                out.append(self._expression(text[i + 2 : end]))
                i = end + 1
            else:  # a bare "$" (the file uses none as a variable)
                out.append("$")
                i += 1
        return "".join(out)

    def _expression(self, body: str) -> str:
        """``NAME``, ``NAME:-default``, ``NAME-default``, ``NAME:?error``, ``NAME?error``;
        a default may itself hold ``${...}`` (Compose v2 interpolates it)."""
        name = _NAME.match(body)
        assert name, f"not a variable: ${{{body}}}"
        key, rest = name.group(), body[name.end() :]
        self.used.add(key)
        value = self.env.get(key)
        op = next((op for op in (":-", "-", ":?", "?") if rest.startswith(op)), None)
        if op is None:
            assert not rest, f"unsupported interpolation: ${{{body}}}"
            if value is None:
                self.without_default.add(key)
                return ""
            return value
        arg = rest[len(op) :]
        unset = value is None or (op.startswith(":") and value == "")
        if op in (":-", "-"):
            return self(arg) if unset else value
        if unset:
            raise KeyError(f"${{{key}}} is required: {arg}")
        return value

    def walk(self, node: Any) -> Any:
        """The YAML tree with every string interpolated."""
        if isinstance(node, dict):
            return {key: self.walk(value) for key, value in node.items()}
        if isinstance(node, list):
            return [self.walk(value) for value in node]
        return self(node) if isinstance(node, str) else node


def load_compose(env: dict[str, str] | None = None) -> tuple[dict[str, Any], Interpolation]:
    """The compose file interpolated with ``.env`` (or ``env``), and what was interpolated."""
    raw = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    interpolation = Interpolation(read_dotenv() if env is None else env)
    return interpolation.walk(raw), interpolation


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping (both compose notations)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def command(service: dict[str, Any]) -> list[str]:
    """A service's command as a list (both compose notations)."""
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction, continuation lines joined."""

    keyword: str
    arguments: str
    stage: int  # index of the FROM it belongs to


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    """The instructions of a Dockerfile, comments dropped."""
    logical: list[str] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    instructions, stage = [], -1
    for text in logical:
        keyword, _, arguments = text.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        instructions.append(Instruction(keyword.upper(), arguments.strip(), stage))
    return instructions


def _closing_brace(text: str, start: int) -> int:
    """The index of the ``}`` that closes the ``${`` whose body starts at ``start``."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unclosed ${{ in {text!r}")
