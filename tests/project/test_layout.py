"""The layout shows the system: scripts/ holds entry points only,
the local stack and the benchmarks are packages of their own, product code imports
neither them nor the tests, and the packages form layers no import climbs back through
(docs/architecture.md#the-layers)."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT

PRODUCT = (
    "bridge", "common", "conf", "contract", "jobs", "lake", "ops", "producer", "telemetry",
    "topics",
)  # fmt: skip
TOOLING = ("scripts", "local_stack", "bench", "tests")

# The packages from the bottom up: a package imports only those of the layers below it
# (docs/architecture.md#the-layers).
LAYERS = (
    ("common", "contract"),
    ("conf",),
    ("lake", "telemetry", "topics"),
    ("bridge", "jobs", "producer"),
    ("ops",),
    ("local_stack",),
    ("bench",),
    ("tests",),
)


def imported_packages(path: Path) -> set[str]:
    """The top-level packages a module imports, wherever the import sits."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def module_name(path: Path) -> str:
    """``jobs/queries/ingest.py`` -> ``jobs.queries.ingest`` (a package: its folder's name)."""
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """The project modules a module imports, wherever the import sits; ``from a import b``
    names ``a.b`` when that is a module of its own."""
    ours = {package for layer in LAYERS for package in layer}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            folder = PROJECT_ROOT / node.module.replace(".", "/")
            names = [
                f"{node.module}.{alias.name}"
                if (folder / f"{alias.name}.py").exists() or (folder / alias.name).is_dir()
                else node.module
                for alias in node.names
            ]
        else:
            continue
        found |= {name for name in names if name.split(".")[0] in ours}
    return found


def import_graph() -> dict[str, set[str]]:
    """Every project module (tests included) -> the project modules it imports."""
    return {
        module_name(path): imported_modules(path)
        for layer in LAYERS
        for package in layer
        for path in (PROJECT_ROOT / package).rglob("*.py")
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_each_package_imports_only_the_layers_below_it() -> None:
    rank = {package: n for n, layer in enumerate(LAYERS) for package in layer}
    climbing = sorted(
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        for target in targets
        if source.split(".")[0] != target.split(".")[0]
        and rank[target.split(".")[0]] >= rank[source.split(".")[0]]
    )
    assert climbing == []


# jobs/'s rooms from the bottom up (docs/architecture.md#the-layers).
JOB_LAYERS = (
    ("spark", "metrics"),
    ("writer",),
    ("ingest", "windows"),
    ("alerting",),
    ("queries",),
    ("realtime",),
    ("driver",),
    ("stream", "python_daemon"),
)


def test_the_jobs_rooms_import_only_the_rooms_below_them() -> None:
    rank = {room: n for n, layer in enumerate(JOB_LAYERS) for room in layer}
    rooms = {path.stem for path in (PROJECT_ROOT / "jobs").iterdir() if path.stem != "__init__"}
    assert rooms - {"__pycache__"} == set(rank)  # a new room takes its place here
    climbing = sorted(
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        if source.startswith("jobs.") and source.count(".") >= 1
        for target in targets
        if target.startswith("jobs.")
        and target.split(".")[1] != source.split(".")[1]
        and rank[target.split(".")[1]] >= rank[source.split(".")[1]]
    )
    assert climbing == []


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_no_import_climbs_back_inside_a_package(depth: int) -> None:
    # Folded to ``depth`` name parts (jobs.windows, then jobs.windows.panes, ...): the
    # sub-packages and modules of each package form layers too, without a loop.
    folded: dict[str, set[str]] = {}
    for source, targets in import_graph().items():
        head = ".".join(source.split(".")[:depth])
        folded.setdefault(head, set()).update(
            ".".join(target.split(".")[:depth])
            for target in targets
            if ".".join(target.split(".")[:depth]) != head
        )
    assert cycles(folded) == []


@pytest.mark.parametrize("package", PRODUCT)
def test_product_code_imports_no_tooling(package: str) -> None:
    offenders = {
        str(path.relative_to(PROJECT_ROOT)): sorted(imported_packages(path) & set(TOOLING))
        for path in (PROJECT_ROOT / package).rglob("*.py")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


@pytest.mark.parametrize("package", [*PRODUCT, "local_stack", "bench"])
def test_no_command_line_is_built_by_hand(package: str) -> None:
    # conf/cli.py makes every command line from a model (pydantic-settings): the
    # programs', the local servers', the set-up's steps', the benchmark's.
    offenders = sorted(
        str(path.relative_to(PROJECT_ROOT))
        for path in (PROJECT_ROOT / package).rglob("*.py")
        if {"argparse", "optparse", "getopt"} & imported_packages(path)
    )
    assert offenders == []


def test_scripts_holds_entry_points_only() -> None:
    entries = sorted(p.name for p in (PROJECT_ROOT / "scripts").iterdir())
    assert entries and all(
        (PROJECT_ROOT / "scripts" / name).is_file() and "." not in name for name in entries
    ), entries


def test_every_module_an_entry_point_runs_exists() -> None:
    named = set()
    for path in (PROJECT_ROOT / "scripts").iterdir():
        named |= set(re.findall(r"-m ([a-z_][a-z0-9_.]*)", path.read_text(encoding="utf-8")))
    named -= {"pip", "pytest", "venv"}
    assert named, "no module found: the pattern no longer matches the scripts"
    missing = sorted(m for m in named if importlib.util.find_spec(m) is None)
    assert missing == []


def test_each_default_is_written_once() -> None:
    # conf/settings/job.py holds the defaults; the shipped settings file only what an
    # installation changes (nothing, as shipped), so the two cannot drift apart.
    from conf.settings.base import PIPELINE_CONFIG, SettingsFile, SettingsFileSource, load_settings
    from conf.settings.job import JobSettings

    shipped = SettingsFileSource(JobSettings, SettingsFile(PIPELINE_CONFIG))()
    repeated = {
        name: value
        for name, value in shipped.items()
        if JobSettings.model_fields[name].get_default(call_default_factory=True) == value
    }
    assert repeated == {}
    assert load_settings(JobSettings, {}, SettingsFile(PIPELINE_CONFIG)) == load_settings(
        JobSettings, {}
    )


def _module_aliases(tree: ast.AST) -> dict[str, str]:
    """Names bound to a project module by ``from package import module [as alias]``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for name in node.names:
                full = f"{node.module}.{name.name}"
                if full.split(".")[0] not in PRODUCT + TOOLING:
                    continue
                try:
                    found = importlib.util.find_spec(full)
                except ModuleNotFoundError:  # a name in a module, not a module
                    found = None
                if found is not None:
                    aliases[name.asname or name.name] = full
    return aliases


def test_what_code_takes_from_a_project_module_that_module_has() -> None:
    """``module.name`` for a project module imported whole names something the module
    has: a refactoring that moved a function away (local_stack's servers lost
    ``free_port`` to local_stack/server.py) broke bench's Alertmanager and bucket parts,
    which only a full benchmark run reached."""
    missing = []
    for path in sorted(PROJECT_ROOT.glob("*/**/*.py")):
        if path.relative_to(PROJECT_ROOT).parts[0] not in PRODUCT + TOOLING:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # A name the file also binds otherwise (an argument, a variable) is left out.
        bound = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | {
            n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        aliases = {k: v for k, v in _module_aliases(tree).items() if k not in bound}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                module = importlib.import_module(aliases[node.value.id])
                if not hasattr(module, node.attr):
                    missing.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}: "
                                   f"{aliases[node.value.id]}.{node.attr}")  # fmt: skip
    assert not missing, "\n".join(missing)
