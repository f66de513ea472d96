"""docker-compose.yml and the Dockerfile as data, read the way Docker Compose reads them.

Only what the static checks need: ``.env`` parsing, ``${VAR}`` interpolation with the
``:-``, ``-``, ``:?`` and ``?`` forms and ``$$`` escapes, and the Dockerfile's instructions.
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

_VARIABLE = re.compile(
    r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?])?(?P<arg>[^}]*)\})"
)


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
        def one(match: re.Match[str]) -> str:
            name, op, arg = match.group("name"), match.group("op"), match.group("arg")
            if name is None:
                return "$"  # "$$" is a literal dollar
            self.used.add(name)
            value = self.env.get(name)
            if op in (":-", "-"):
                unset = value is None or (op == ":-" and value == "")
                return arg if unset else str(value)
            if op in (":?", "?"):
                if value is None or (op == ":?" and value == ""):
                    raise KeyError(f"${{{name}}} is required: {arg}")
                return value
            if value is None:
                self.without_default.add(name)
                return ""
            return value

        return _VARIABLE.sub(one, text)

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
