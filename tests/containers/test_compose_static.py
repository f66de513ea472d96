"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

What `docker compose up` needs to work on a machine with an engine and no edits: every
referenced file exists, every variable has a value, images are pinned, start-up is ordered
by health, and the names, ports and paths the services pass each other are the ones the
programs read.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from conf.settings.base import SECRET_SETTINGS, SettingsError, load_settings
from conf.settings.bridge import BridgeSettings
from conf.settings.dashboard import DashboardSettings
from conf.settings.job import JobSettings
from conf.settings.notifier import NotifierSettings
from conf.settings.producer import ProducerSettings
from conf.versions import official_kafka_image, s3proxy_version
from lake.layout import Lake
from local_stack.kafka import BROKER_SESSION_TIMEOUT_MS
from local_stack.settings import AlertmanagerLocalSettings
from tests.support.compose_file import (
    DOCKERFILE,
    Instruction,
    command,
    dockerfile_instructions,
    environment,
    load_compose,
    read_dotenv,
)

COMPOSE, INTERPOLATION = load_compose()
SERVICES: dict = COMPOSE["services"]
APP_IMAGE = SERVICES["job"]["image"]
# The settings each program reads (its SENSORWATCH_* variables must be among them).
PROGRAMS = {
    "producer": ProducerSettings,
    "jobs.stream": JobSettings,
    "ops.dashboard": DashboardSettings,
    "ops.notify": NotifierSettings,
    "local_stack.alertmanager": AlertmanagerLocalSettings,
    "bridge": BridgeSettings,
}
ONE_SHOT = {
    "topic-init", "alertmanager-init", "prometheus-init", "s3-init", "s3a-jars", "mosquitto-init",
}  # fmt: skip
ALERTMANAGER_IMAGE = "prom/alertmanager"
PROMETHEUS_IMAGE = "prom/prometheus"
MOSQUITTO_IMAGE = "eclipse-mosquitto"
DEBIAN_ALERTMANAGER = Path("/usr/bin/prometheus-alertmanager")
LONG_RUNNING = set(SERVICES) - ONE_SHOT


def program(service: dict) -> str | None:
    """The Python module a service runs (``python -m X``, or through scripts/compose-job,
    scripts/compose-producer or scripts/compose-run)."""
    cmd = command(service)
    if cmd and cmd[0] == "scripts/compose-run":
        cmd = cmd[1:]
    if cmd[:2] == ["python", "-m"]:
        return cmd[2]
    if cmd[:2] == ["sh", "-c"] and cmd[2].startswith("python -m "):
        return cmd[2].split()[2]
    if cmd and cmd[0] == "scripts/compose-job":
        text = (PROJECT_ROOT / cmd[0]).read_text(encoding="utf-8")
        return re.search(r"exec scripts/compose-run python -m (\S+)", text).group(1)
    if cmd and cmd[0] == "scripts/compose-producer":
        text = (PROJECT_ROOT / cmd[0]).read_text(encoding="utf-8")
        return re.search(r"^exec python -m (\S+)", text, re.MULTILINE).group(1)
    return None


def test_the_demo_has_its_services() -> None:
    assert set(SERVICES) == {
        "kafka", "topic-init", "producer", "job", "dashboard",
        "alertmanager-init", "alertmanager", "notifier", "prometheus-init", "prometheus",
        "spark-master", "spark-worker-1", "spark-worker-2",
        "s3-init", "s3", "s3a-jars",
        "mosquitto-init", "mosquitto", "bridge",
    }  # fmt: skip
    assert {name for name, s in SERVICES.items() if "cluster" in s.get("profiles", [])} == {
        "spark-master",
        "spark-worker-1",
        "spark-worker-2",
    }
    assert {name for name, s in SERVICES.items() if "s3" in s.get("profiles", [])} == {
        "s3-init",
        "s3",
        "s3a-jars",
    }
    assert {name for name, s in SERVICES.items() if "mqtt" in s.get("profiles", [])} == {
        "mosquitto-init",
        "mosquitto",
        "bridge",
    }
    # `docker compose up` runs what it ran before the profiles came: no profile's service
    # is in it (the producer writes to Kafka then: test_the_producer_...).
    assert {name for name, s in SERVICES.items() if not s.get("profiles")} == {
        "kafka", "topic-init", "producer", "job", "dashboard",
        "alertmanager-init", "alertmanager", "notifier", "prometheus-init", "prometheus",
    }  # fmt: skip


def test_every_variable_has_a_value_without_editing() -> None:
    dotenv = read_dotenv()

    assert INTERPOLATION.without_default == set(), "variables with neither default nor .env"
    # .env holds nothing stale: each line is read by compose (KAFKA_VERSION by setup too,
    # S3PROXY_VERSION by scripts/s3-local too).
    assert set(dotenv) - INTERPOLATION.used == set()
    assert s3proxy_version() == dotenv["S3PROXY_VERSION"]
    # With an empty environment (no .env) only the pinned broker version is required.
    with pytest.raises(KeyError, match="KAFKA_VERSION"):
        load_compose(env={})
    pins = {name: dotenv[name] for name in ("KAFKA_VERSION", "S3PROXY_VERSION")}
    assert load_compose(env=pins)[1].without_default == set()


def dockerfile_base_images() -> list[str]:
    """The Dockerfile's base images (its own stages left out), ARG defaults filled in."""
    instructions = dockerfile_instructions()
    global_args = {}
    for instruction in instructions:
        if instruction.keyword == "ARG" and instruction.stage == -1:
            name, _, default = instruction.arguments.partition("=")
            global_args[name] = default
    froms, stages = dockerfile_stages(instructions)
    return [
        re.sub(r"\$\{(\w+)\}", lambda m: global_args[m.group(1)], words[0])
        for words in froms.values()
        if words[0] not in stages  # built FROM one of this Dockerfile's own stages
    ]


def test_images_are_pinned() -> None:
    for name, service in SERVICES.items():
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: image {image!r} is not pinned"
        if "build" not in service and repository == IMAGE_VARIABLES["S3PROXY_IMAGE"].split(":")[0]:
            assert image == IMAGE_VARIABLES["S3PROXY_IMAGE"], f"{name}: S3PROXY_VERSION"
        elif "build" not in service and repository not in (
            ALERTMANAGER_IMAGE, PROMETHEUS_IMAGE, MOSQUITTO_IMAGE,
        ):  # fmt: skip
            assert image == official_kafka_image(), f"{name}: the broker follows KAFKA_VERSION"
    for base in dockerfile_base_images():
        assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*", base), f"unpinned {base}"


# The variable that names each image, and the official image it defaults to.
IMAGE_VARIABLES = {
    "PYTHON_IMAGE": "python:3.11.13-slim-bookworm",
    "KAFKA_IMAGE": official_kafka_image(),
    "ALERTMANAGER_IMAGE": "prom/alertmanager:v0.25.0",
    "PROMETHEUS_IMAGE": "prom/prometheus:v2.42.0",
    "S3PROXY_IMAGE": f"andrewgaul/s3proxy:s3proxy-{s3proxy_version()}",
    "MOSQUITTO_IMAGE": "eclipse-mosquitto:2.0.11",
}


def test_every_image_is_a_variable_with_the_official_default() -> None:
    """Behind a registry mirror, or in the engine lane, one variable per image changes it."""
    assert dockerfile_base_images() == [IMAGE_VARIABLES["PYTHON_IMAGE"]]
    assert SERVICES["job"]["build"]["args"]["PYTHON_IMAGE"] == IMAGE_VARIABLES["PYTHON_IMAGE"]
    assert {s["image"] for s in SERVICES.values() if "build" not in s} == {
        IMAGE_VARIABLES["KAFKA_IMAGE"],
        IMAGE_VARIABLES["ALERTMANAGER_IMAGE"],
        IMAGE_VARIABLES["PROMETHEUS_IMAGE"],
        IMAGE_VARIABLES["S3PROXY_IMAGE"],
        IMAGE_VARIABLES["MOSQUITTO_IMAGE"],
    }
    mirror = {**read_dotenv(), **{k: f"mirror.example/{v}" for k, v in IMAGE_VARIABLES.items()}}
    mirror["SENSORWATCH_IMAGE"] = "mirror.example/sensorwatch:1"
    mirror["SENSORWATCH_BUILD_IMAGE"] = "mirror.example/sensorwatch-build:1"
    services = load_compose(env=mirror)[0]["services"]
    images = {s["image"] for s in services.values()}
    assert images == {
        f"mirror.example/{v}"
        for v in IMAGE_VARIABLES.values()
        if v != IMAGE_VARIABLES["PYTHON_IMAGE"]
    } | {"mirror.example/sensorwatch:1", "mirror.example/sensorwatch-build:1"}
    for name in ("job", "s3a-jars"):
        assert (
            services[name]["build"]["args"]["PYTHON_IMAGE"]
            == "mirror.example/python:3.11.13-slim-bookworm"
        )


def test_the_engine_lane_names_its_images_its_own_way(tmp_path: Path) -> None:
    """The lane's stand-ins never take an official image's name (a later pull would mix
    them up), and it sets exactly the variables the compose file and Dockerfile read."""
    (tmp_path / "env").touch()  # a lane that is "up" there
    done = subprocess.run(
        ["scripts/docker-lane", "env"], capture_output=True, text=True, timeout=30,
        cwd=PROJECT_ROOT, env={**os.environ, "SENSORWATCH_DOCKER_LANE": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lane = dict(line.removeprefix("export ").split("=", 1) for line in done.stdout.splitlines())
    for variable, official in IMAGE_VARIABLES.items():
        assert lane[variable].startswith("sensorwatch-lane/"), variable
        assert lane[variable].split(":")[0] != official.split(":")[0]
    assert lane["TESTCONTAINERS_RYUK_DISABLED"] == "true"
    assert lane["DOCKER_HOST"].startswith("unix://")


def test_alertmanager_is_the_version_run_locally() -> None:
    """The image runs the Alertmanager release that scripts/run-local runs from Debian's
    prometheus-alertmanager, so a config that works in one works in the other."""
    repository, _, tag = SERVICES["alertmanager"]["image"].rpartition(":")

    assert repository == ALERTMANAGER_IMAGE and re.fullmatch(r"v\d+\.\d+\.\d+", tag)
    if not DEBIAN_ALERTMANAGER.exists():
        pytest.skip("Debian's prometheus-alertmanager is not installed: run scripts/setup")
    done = subprocess.run(
        [str(DEBIAN_ALERTMANAGER), "--version"], capture_output=True, text=True, timeout=30
    )
    local = re.search(r"version (\d+\.\d+\.\d+)", done.stdout + done.stderr).group(1)
    assert tag == f"v{local}"


def test_builds_reference_files_that_exist() -> None:
    for name, service in SERVICES.items():
        if "build" in service:
            context = PROJECT_ROOT / service["build"]["context"]
            assert context.is_dir(), name
            assert (context / service["build"]["dockerfile"]).is_file(), name
            # One image for all SensorWatch services; its build stage (with Maven) only
            # for fetching the S3 connector's jars (the s3 profile).
            if service["build"].get("target") == "build":
                assert name == "s3a-jars", name
            else:
                assert service["image"] == APP_IMAGE, "one image for all SensorWatch services"
        cmd = command(service)
        if cmd and cmd[0].startswith("scripts/"):
            assert os.access(PROJECT_ROOT / cmd[0], os.X_OK), f"{name}: {cmd[0]} not executable"
        module = program(service)
        if module:
            assert importlib.util.find_spec(module) is not None, f"{name}: no module {module}"


def dockerignored(path: str) -> bool:
    patterns = [
        line.strip().rstrip("/")
        for line in (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = Path(path).parts
    return any(
        fnmatch.fnmatch(path, p) or fnmatch.fnmatch(parts[0], p) or p.lstrip("*/") in parts
        for p in patterns
    )


def test_dockerfile_copies_what_exists_installs_with_setup_and_runs_unprivileged() -> None:
    instructions = dockerfile_instructions()
    final_stage = max(i.stage for i in instructions)
    for instruction in instructions:
        if instruction.keyword != "COPY" or "--from=" in instruction.arguments:
            continue
        *sources, _destination = shlex.split(instruction.arguments)
        for source in sources:
            if source == ".":
                continue
            assert (PROJECT_ROOT / source).exists(), f"COPY {source}: no such file"
            assert not dockerignored(source.rstrip("/")), f"COPY {source}: in .dockerignore"
    runs = " ".join(i.arguments for i in instructions if i.keyword == "RUN")
    assert "scripts/setup --no-browser" in runs, "the image installs exactly as setup does"
    users = [i.arguments for i in instructions if i.keyword == "USER" and i.stage == final_stage]
    assert users and users[-1] not in ("root", "0"), "the image must run as a non-root user"
    # Built in the image, never copied from the host: a host venv would not run there.
    for generated in (".venv", ".cache", "var", ".git"):
        assert dockerignored(generated), f".dockerignore must exclude {generated}"
    assert DOCKERFILE.name == SERVICES["job"]["build"]["dockerfile"]


def dockerfile_stages(
    instructions: list[Instruction],
) -> tuple[dict[int, list[str]], dict[str, int]]:
    """Each stage's FROM words by stage number, and the named stages' numbers."""
    froms = {i.stage: shlex.split(i.arguments) for i in instructions if i.keyword == "FROM"}
    return froms, {words[-1]: stage for stage, words in froms.items() if len(words) == 3}


def test_the_runtime_image_is_built_on_the_venv_stage_not_a_copy_of_it() -> None:
    """The runtime shares the venv stage's layer: copying the 1.4 GB venv out of the build
    stage made a cold build half as long again (docs/benchmarks.md). Maven stays in the
    build stage, which the runtime only takes the connector jars and .env from."""
    instructions = dockerfile_instructions()
    froms, names = dockerfile_stages(instructions)
    runtime = max(froms)
    taken = [i.arguments for i in instructions if i.stage == runtime and "--from=" in i.arguments]

    assert froms[runtime][0] == "venv" and froms[names["build"]][0] == "venv"
    assert taken and all(".venv" not in words for words in taken), taken
    maven = [i.stage for i in instructions if i.keyword == "RUN" and " maven" in i.arguments]
    assert maven == [names["build"]], "Maven is installed in the build stage only"


def dockerfile_user(target: str | None) -> str:
    """The user a build target of the Dockerfile runs as (the last stage without one):
    its last USER, else that of the stage it is built FROM, else root."""
    instructions = dockerfile_instructions()
    froms, names = dockerfile_stages(instructions)
    stage = names[target] if target else max(froms)
    while True:
        users = [i.arguments for i in instructions if i.keyword == "USER" and i.stage == stage]
        if users:
            return users[-1]
        parent = froms[stage][0]
        if parent not in names:
            return "root"  # the base images run as root
        stage = names[parent]


# Images that run as their own unprivileged user (prom/alertmanager and prom/prometheus:
# nobody; apache/kafka: appuser); the engine lane's stand-ins do the same
# (local_stack/lane/*/Dockerfile).
OWN_USER_IMAGES = ("prom/alertmanager:", "prom/prometheus:", "apache/kafka:")


def test_no_container_runs_as_root() -> None:
    """docs/architecture.md#connections-and-security: containers run as unprivileged users,
    the one-shots included, so every volume a container writes must come owned by that
    container's user."""
    for name, service in SERVICES.items():
        user = str(service.get("user", ""))
        if user:
            assert user.split(":")[0] not in ("0", "root"), f"{name} runs as root"
        elif "build" in service:
            built = dockerfile_user(service["build"].get("target"))
            assert built not in ("0", "root"), f"{name}: its image runs as root"
        else:
            assert any(own in service["image"] for own in OWN_USER_IMAGES), (
                f"{name}: does {service['image']} run as an unprivileged user?"
            )
    assert dockerfile_user(None) == dockerfile_user("build") == "sensorwatch"


def test_start_up_is_ordered_by_health() -> None:
    for name in LONG_RUNNING:
        test = SERVICES[name].get("healthcheck", {}).get("test")
        assert test, f"{name}: no healthcheck"
    for name, service in SERVICES.items():
        for target, rule in (service.get("depends_on") or {}).items():
            assert target in SERVICES, f"{name} depends on unknown {target}"
            condition = rule["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in SERVICES[target], f"{name}: {target} has no healthcheck"
            elif condition == "service_completed_successfully":
                assert SERVICES[target].get("restart") == "no", f"{target} is not one-shot"
            else:
                assert condition == "service_started"
            # A dependency on a profile's service must be optional outside that profile.
            if SERVICES[target].get("profiles") and not service.get("profiles"):
                assert rule.get("required") is False, f"{name} -> {target} must be optional"
    assert SERVICES["topic-init"]["restart"] == "no"


def test_volumes_are_named_and_shared_where_the_data_flows() -> None:
    declared = set(COMPOSE["volumes"])
    mounts: dict[str, dict[str, str]] = {}
    for name, service in SERVICES.items():
        for mount in service.get("volumes", []):
            volume, target, *mode = mount.split(":")
            if volume.startswith("./"):  # a project file, read only (a config template)
                assert (PROJECT_ROOT / volume).is_file(), f"{name}: no file {volume}"
                assert mode == ["ro"], f"{name}: {volume} must be mounted read-only"
                continue
            assert volume in declared, f"{name}: {volume} is not a named volume"
            mounts.setdefault(volume, {})[name] = f"{target}:{mode[0] if mode else 'rw'}"
    lake = SERVICES["job"]["environment"]["SENSORWATCH_LAKE"]
    registry = SERVICES["job"]["environment"]["SENSORWATCH_REGISTRY"]

    # Tables and checkpoints together, written by the driver and the cluster's executors.
    assert mounts["lake"] == {
        "job": f"{lake}:rw",
        "spark-worker-1": f"{lake}:rw",
        "spark-worker-2": f"{lake}:rw",
        "dashboard": f"{lake}:ro",
        "notifier": f"{lake}:ro",
    }
    # The notifier reads the lake where the job writes it (the s3 profile moves both).
    assert "--lake" not in command(SERVICES["notifier"])
    assert SERVICES["notifier"]["environment"]["SENSORWATCH_LAKE"] == lake
    # Alertmanager reads the config its init step renders, and keeps its state in a
    # volume of its own.
    init_target = mounts["alertmanager-config"]["alertmanager-init"].rpartition(":")[0]
    init_command = command(SERVICES["alertmanager-init"])
    written = init_command[init_command.index("--out") + 1]
    config_dir = mounts["alertmanager-config"]["alertmanager"]
    assert Path(written).parent == Path(init_target)
    assert config_dir == "/etc/sensorwatch:ro"
    assert f"--config.file=/etc/sensorwatch/{Path(written).name}" in command(
        SERVICES["alertmanager"]
    )
    storage = mounts["alertmanager-data"]["alertmanager"].rpartition(":")[0]
    assert f"--storage.path={storage}" in command(SERVICES["alertmanager"])
    assert set(mounts["alertmanager-data"]) == {"alertmanager"}
    assert Path(Lake(Path(lake)).checkpoint("ingest")).is_relative_to(lake)
    # The producer writes the fleet; the job's driver and the dashboard read it.
    assert SERVICES["producer"]["environment"]["SENSORWATCH_REGISTRY_OUT"] == registry
    # The job waits for the producer's health, which means: the fleet file is written.
    assert registry in " ".join(SERVICES["producer"]["healthcheck"]["test"])
    fleet_dir = str(Path(registry).parent)
    assert mounts["fleet"]["producer"] == f"{fleet_dir}:rw"
    assert {s for s, m in mounts["fleet"].items() if m == f"{fleet_dir}:ro"} == {"job", "dashboard"}
    assert SERVICES["dashboard"]["environment"]["SENSORWATCH_REGISTRY"] == registry


def local_path(value: str, scratch: Path) -> str:
    """A container path under /data/ or /run/ mapped into ``scratch`` (files created empty)."""
    if not value.startswith(("/data/", "/run/")):
        return value
    path = scratch / value.removeprefix("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix:
        path.touch()
    return str(path)


@pytest.mark.parametrize(
    "name", ["producer", "job", "dashboard", "notifier", "alertmanager-init", "bridge"]
)
def test_each_program_accepts_its_environment(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings_class = PROGRAMS[program(SERVICES[name])]
    env = environment(SERVICES[name])
    for key in [k for k in os.environ if k.startswith("SENSORWATCH_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        assert key.startswith("SENSORWATCH_"), f"{name}: {key} is read by nothing"
        field = key.removeprefix("SENSORWATCH_").lower()
        if field.endswith("_file") and field.removesuffix("_file") in SECRET_SETTINGS:
            field = field.removesuffix("_file")  # a secret read from the file it names
            secret = Path(local_path(value, tmp_path))
            secret.parent.mkdir(parents=True, exist_ok=True)
            secret.write_text("a-password", encoding="utf-8")
        assert field in settings_class.model_fields, f"{name}: {key} is not a setting"
        if value:  # empty means "not set" (compose-job unsets it)
            monkeypatch.setenv(key, local_path(value, tmp_path))
    try:
        load_settings(settings_class, {})
    except SettingsError as exc:
        pytest.fail(f"{name} would not start with its compose environment:\n{exc}")


def test_names_and_ports_agree_between_services() -> None:
    kafka_env = SERVICES["kafka"]["environment"]
    internal = re.search(r"INTERNAL://([^,]+)", kafka_env["KAFKA_ADVERTISED_LISTENERS"]).group(1)
    listener_port = re.search(r"INTERNAL://:(\d+)", kafka_env["KAFKA_LISTENERS"]).group(1)
    topic_init = " ".join(command(SERVICES["topic-init"]))
    topic = SERVICES["producer"]["environment"]["SENSORWATCH_TOPIC"]

    assert internal == f"kafka:{listener_port}"
    for name in ("producer", "job"):
        assert SERVICES[name]["environment"]["SENSORWATCH_BOOTSTRAP_SERVERS"] == internal
        assert SERVICES[name]["environment"]["SENSORWATCH_TOPIC"] == topic
    assert f"--bootstrap-server={internal}" in topic_init
    # Both topics, each made like the other: the readings and the real-time path's alerts.
    alerts_topic = SERVICES["job"]["environment"]["SENSORWATCH_ALERTS_TOPIC"]
    assert command(SERVICES["topic-init"])[-2:] == [topic, alerts_topic]
    assert '--topic="$topic"' in topic_init and "--partitions=6" in topic_init
    assert SERVICES["notifier"]["environment"]["SENSORWATCH_ALERTS_TOPIC"] == alerts_topic
    assert SERVICES["notifier"]["environment"]["SENSORWATCH_BOOTSTRAP_SERVERS"] == internal
    # The broker's advertised host port is the one published.
    external = re.search(r"EXTERNAL://localhost:(\d+)", kafka_env["KAFKA_ADVERTISED_LISTENERS"])
    assert [p.split(":", 1)[1] for p in SERVICES["kafka"]["ports"]] == [f"{external.group(1)}:9094"]

    dashboard = SERVICES["dashboard"]
    port = dashboard["environment"]["SENSORWATCH_DASHBOARD_PORT"]
    assert dashboard["environment"]["SENSORWATCH_DASHBOARD_HOST"] == "0.0.0.0"
    assert dashboard["ports"][0].endswith(f":{port}")
    assert f"127.0.0.1:{port}/healthz" in " ".join(dashboard["healthcheck"]["test"])

    master_cmd = command(SERVICES["spark-master"])
    master_url = f"spark://spark-master:{master_cmd[master_cmd.index('--port') + 1]}"
    compose_job = (PROJECT_ROOT / "scripts" / "compose-job").read_text(encoding="utf-8")
    assert f"SENSORWATCH_MASTER={master_url}" in compose_job
    for worker in ("spark-worker-1", "spark-worker-2"):
        assert master_url in command(SERVICES[worker])
    # Executors call the driver back by its host name.
    assert SERVICES["job"]["hostname"] == "job"

    host_ports = [p.split(":")[-2] for s in SERVICES.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), "two services publish one host port"


def test_job_healthcheck_watches_the_ingest_checkpoint() -> None:
    lake = Path(SERVICES["job"]["environment"]["SENSORWATCH_LAKE"])
    test = " ".join(SERVICES["job"]["healthcheck"]["test"])
    assert f"{Lake(lake).checkpoint('ingest')}/commits/0" in test
    # ... or, with the s3 profile, in the bucket: the probe reads the lake where it is.
    assert "scripts/compose-run python -m jobs.driver.ready" in test


def test_job_probe_asks_the_bucket_until_a_batch_committed_then_remembers(tmp_path) -> None:
    """The probe as the job's container runs it, with the volume and /tmp moved here: the
    volume stays empty (the s3 profile), so jobs.driver.ready answers until it says ready; after
    that the probe starts no Python (1.8 CPU seconds every 10 s)."""
    check = SERVICES["job"]["healthcheck"]["test"]
    assert check[0] == "CMD-SHELL", check
    volume, marker = tmp_path / "volume", tmp_path / "ingest-ready"
    volume.mkdir()
    script = (
        check[1].replace("/data/lake", str(volume)).replace("/tmp/ingest-ready", str(marker))
        .replace(
            "python -m jobs.driver.ready", f"{shlex.quote(sys.executable)} -m jobs.driver.ready"
        )
    )  # fmt: skip
    assert str(marker) in script, "the probe does not remember its answer"
    bucket = tmp_path / "bucket"  # where jobs.driver.ready reads the lake (SENSORWATCH_LAKE)

    def probe() -> int:
        env = {**os.environ, "SENSORWATCH_LAKE": str(bucket)}
        return subprocess.run(["sh", "-c", script], cwd=PROJECT_ROOT, env=env,
                              capture_output=True, timeout=60).returncode  # fmt: skip

    assert probe() != 0 and not marker.exists()
    commits = Path(Lake(bucket).checkpoint("ingest")) / "commits"
    commits.mkdir(parents=True)
    (commits / "0").write_text("v1\n", encoding="utf-8")
    assert probe() == 0 and marker.exists()
    # The lake gone: a probe that asked again would fail; this one remembers.
    shutil.rmtree(bucket)
    assert probe() == 0


def test_the_notifier_starts_with_its_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ops.notify import read_command_line

    for key in [k for k in os.environ if k.startswith("SENSORWATCH_")]:
        monkeypatch.delenv(key)
    cmd = command(SERVICES["notifier"])
    assert cmd[:4] == ["scripts/compose-run", "python", "-m", "ops.notify"]
    args = read_command_line(cmd[4:])
    args["lake"] = local_path(SERVICES["notifier"]["environment"]["SENSORWATCH_LAKE"], tmp_path)
    try:
        settings = load_settings(NotifierSettings, args)
    except SettingsError as exc:
        pytest.fail(f"the notifier would not start with its compose command:\n{exc}")

    assert settings.notify_once is False
    assert SERVICES["notifier"]["stop_signal"] == "SIGTERM"


def test_alertmanager_names_and_ports_agree() -> None:
    alertmanager = SERVICES["alertmanager"]
    _, host_port, container_port = alertmanager["ports"][0].split(":")
    dashboard = SERVICES["dashboard"]
    dashboard_host_port = dashboard["ports"][0].split(":")[1]
    notifier = command(SERVICES["notifier"])

    # The notifier reaches it by service name inside the network...
    assert notifier[notifier.index("--alertmanager-url") + 1] == (
        f"http://alertmanager:{container_port}"
    )
    # ... the browser on the published host port: the dashboard's links and Alertmanager's
    # own (its external URL); notifications link to the dashboard's published port.
    browser_url = f"http://localhost:{host_port}"
    assert dashboard["environment"]["SENSORWATCH_ALERTMANAGER_URL"] == browser_url
    # ... and the dashboard server, which creates silences, by service name too.
    assert dashboard["environment"]["SENSORWATCH_ALERTMANAGER_API_URL"] == (
        f"http://alertmanager:{container_port}"
    )
    assert f"--web.external-url={browser_url}" in command(alertmanager)
    assert notifier[notifier.index("--dashboard-url") + 1] == (
        f"http://localhost:{dashboard_host_port}"
    )
    assert host_port == read_dotenv()["ALERTMANAGER_PORT"]
    assert alertmanager["healthcheck"]["test"] == [
        "CMD", "wget", "-q", "--spider", f"http://localhost:{container_port}/-/ready",
    ]  # fmt: skip
    assert f"http://alertmanager:{container_port}/-/ready" in " ".join(
        SERVICES["notifier"]["healthcheck"]["test"]
    )
    assert SERVICES["notifier"]["depends_on"] == {
        "alertmanager": {"condition": "service_healthy"},
        "job": {"condition": "service_started"},
    }


def test_the_rendered_alertmanager_config_is_valid(tmp_path: Path) -> None:
    """What alertmanager-init writes, rendered here with its environment, passes
    Alertmanager's own check (amtool from Debian's prometheus-alertmanager)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SENSORWATCH_")},
        **{k: v for k, v in environment(SERVICES["alertmanager-init"]).items() if v},
    }
    script = command(SERVICES["alertmanager-init"])
    out = script.index("--out") + 1
    written = tmp_path / "rendered.yml"
    done = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "python"), *script[1:out], str(written)],
        capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert written.stat().st_mode & 0o777 == 0o644, "Alertmanager runs as another user"
    assert "${" not in "".join(
        line
        for line in written.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("#")
    )
    amtool = Path("/usr/bin/amtool")
    if not amtool.exists():
        pytest.skip("amtool (Debian's prometheus-alertmanager) is not installed")
    check = subprocess.run(
        [str(amtool), "check-config", str(written)], capture_output=True, text=True, timeout=30
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_s3_profile_moves_the_lake_and_nothing_else() -> None:
    """The names, paths, port and user that the s3 profile's services and
    local_stack/compose_s3.py pass each other agree; the app's services mount its
    configuration read-only and start through scripts/compose-run."""
    from local_stack import compose_s3, optional_jars

    s3, init, jars = SERVICES["s3"], SERVICES["s3-init"], SERVICES["s3a-jars"]
    config = str(compose_s3.CONFIG_DIR)
    port = compose_s3.LISTEN.rsplit(":", 1)[1]

    assert f"http://s3:{port}" == compose_s3.ENDPOINT
    assert s3["entrypoint"][-2:] == ["--properties", f"{config}/s3proxy.properties"]
    assert f"/dev/tcp/127.0.0.1/{port}" in " ".join(s3["healthcheck"]["test"])
    assert f"s3-config:{config}:ro" in s3["volumes"]
    assert f"s3-data:{compose_s3.SERVICE_BASEDIR}" in s3["volumes"]
    assert f"s3-config:{config}" in init["volumes"]
    assert f"s3-data:{compose_s3.DATA_DIR}" in init["volumes"]
    assert command(init)[-1] == "init" and "user" not in init
    uid = re.search(r"useradd --uid (\d+)", DOCKERFILE.read_text(encoding="utf-8")).group(1)
    assert s3["user"] == f"{uid}:{uid}", "S3Proxy runs as the app's user, who owns its volumes"
    jars_dir = "/app/" + str(optional_jars.S3A_DIR.relative_to(PROJECT_ROOT))
    assert f"s3a-jars:{jars_dir}" in jars["volumes"]
    assert f"s3a-jars:{jars_dir}:ro" in SERVICES["job"]["volumes"]
    assert command(jars)[-2:] == ["-m", "local_stack.optional_jars"]
    for name in ("job", "dashboard", "notifier", "spark-worker-1", "spark-worker-2"):
        assert f"s3-config:{config}:ro" in SERVICES[name]["volumes"], name
        starts = command(SERVICES[name])[0]
        assert starts in ("scripts/compose-run", "scripts/compose-job"), name
    for name, rule in SERVICES["job"]["depends_on"].items():
        if "s3" in SERVICES[name].get("profiles", []):
            assert rule["required"] is False, name


def test_ports_are_published_on_loopback_unless_opened() -> None:
    """docs/architecture.md#running-it and #connections-and-security: 127.0.0.1 by default,
    one variable opens every port; the dashboard knows where it is published, so that it
    asks for credentials when open."""
    published = [p for service in SERVICES.values() for p in service.get("ports", [])]
    opened = load_compose(env={**read_dotenv(), "PUBLISH_ADDRESS": "0.0.0.0"})[0]["services"]
    env = environment(SERVICES["dashboard"])

    assert published and all(p.startswith("127.0.0.1:") for p in published), published
    assert all(p.startswith("0.0.0.0:") for s in opened.values() for p in s.get("ports", []))
    assert env["SENSORWATCH_DASHBOARD_PUBLISHED_ADDRESS"] == "127.0.0.1"
    # The broker's host listener is reachable by name from elsewhere once opened.
    advertised = "KAFKA_ADVERTISED_LISTENERS"
    assert "EXTERNAL://localhost:" in SERVICES["kafka"]["environment"][advertised]
    named = load_compose(env={**read_dotenv(), "KAFKA_ADVERTISED_HOST": "sw.example"})[0]
    assert "EXTERNAL://sw.example:" in named["services"]["kafka"]["environment"][advertised]
    assert environment(opened["dashboard"])["SENSORWATCH_DASHBOARD_PUBLISHED_ADDRESS"] == "0.0.0.0"
    # No credential in the compose file itself: they come from .env (empty by default).
    for name in ("USER", "PASSWORD", "TOKEN"):
        assert env[f"SENSORWATCH_DASHBOARD_{name}"] == ""
        assert read_dotenv()[f"DASHBOARD_{name}"] == ""


def test_env_never_enters_the_image_only_its_pins_do() -> None:
    """.env may hold a user's settings and secrets (the dashboard's password): it is kept
    out of the build context; the version pins reach the build as arguments."""
    copied = [i.arguments for i in dockerfile_instructions() if i.keyword in ("COPY", "ADD")]
    pins = {k: v for k, v in read_dotenv().items() if k.endswith("_VERSION")}

    assert dockerignored(".env")
    assert not any(".env" in shlex.split(args)[:-1] for args in copied if "--from" not in args)
    for name in ("job", "s3a-jars"):
        args = SERVICES[name]["build"]["args"]
        assert {k: args[k] for k in pins} == pins, name


def test_the_broker_outlasts_a_long_pause_as_every_other_broker_does() -> None:
    """The compose broker's session with its own controller is as long as the local and
    the tests' brokers' (local_stack/kafka.py says why)."""
    kafka_env = SERVICES["kafka"]["environment"]

    assert kafka_env["KAFKA_BROKER_SESSION_TIMEOUT_MS"] == str(BROKER_SESSION_TIMEOUT_MS)


def test_the_broker_takes_more_jvm_options_from_one_variable() -> None:
    """BROKER_JAVA_OPTS (.env, empty) reaches the broker as Kafka's own KAFKA_OPTS: the
    tests give it C1 only, as every other broker of theirs (tests/conftest.py)."""
    given = "-XX:TieredStopAtLevel=1 -Dsome.flag=x"
    services = load_compose(env={**read_dotenv(), "BROKER_JAVA_OPTS": given})[0]["services"]

    assert environment(SERVICES["kafka"])["KAFKA_OPTS"] == ""
    assert environment(services["kafka"])["KAFKA_OPTS"] == given


def test_the_mqtt_profile_names_paths_ports_and_fleet_agree() -> None:
    """The names, paths, port, user and fleet that the mqtt profile's services and
    local_stack/compose_mqtt.py pass each other agree (docs/docker.md)."""
    from local_stack import compose_mqtt
    from local_stack.mosquitto import BRIDGE_USER

    init, broker, bridge = SERVICES["mosquitto-init"], SERVICES["mosquitto"], SERVICES["bridge"]
    producer = SERVICES["producer"]
    broker_dir, credentials = str(compose_mqtt.BROKER_DIR), str(compose_mqtt.CREDENTIALS_DIR)
    port = str(compose_mqtt.PORT)
    bridge_env = environment(bridge)

    # The broker reads what init wrote, at the same path; the clients the logins, read-only.
    assert f"mosquitto:{broker_dir}" in init["volumes"]
    assert f"mosquitto:{broker_dir}" in broker["volumes"]
    assert command(broker) == ["/usr/sbin/mosquitto", "-c", f"{broker_dir}/mosquitto.conf"]
    assert f"mqtt-credentials:{credentials}" in init["volumes"]
    for name in ("bridge", "producer"):
        assert f"mqtt-credentials:{credentials}:ro" in SERVICES[name]["volumes"], name
    volumes = {name: service.get("volumes", []) for name, service in SERVICES.items()}
    holders = {n for n, ms in volumes.items() if any(m.startswith("mosquitto:") for m in ms)}
    # Only the broker and its init step hold the password file and the queued readings.
    assert holders == {"mosquitto-init", "mosquitto"}
    # Init and the broker run as the app's user, who owns the volumes (as S3Proxy does).
    uid = re.search(r"useradd --uid (\d+)", DOCKERFILE.read_text(encoding="utf-8")).group(1)
    assert broker["user"] == f"{uid}:{uid}" and "user" not in init
    assert compose_mqtt.CREDENTIALS_DIR.parent == Path("/run")
    # The bridge logs in as its user with the password init made, on the broker's port.
    assert bridge_env["SENSORWATCH_MQTT_HOST"] == "mosquitto"
    assert bridge_env["SENSORWATCH_MQTT_PORT"] == port
    assert bridge_env["SENSORWATCH_MQTT_USERNAME"] == BRIDGE_USER
    assert bridge_env["SENSORWATCH_MQTT_PASSWORD_FILE"] == f"{credentials}/{BRIDGE_USER}"
    assert bridge_env["SENSORWATCH_TOPIC"] == environment(producer)["SENSORWATCH_TOPIC"]
    assert bridge_env["SENSORWATCH_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert [p.rsplit(":", 1)[1] for p in broker["ports"]] == [port, str(compose_mqtt.TLS_PORT)]
    assert f"-p {port} " in broker["healthcheck"]["test"][1]
    # Healthy once subscribed, on its /metrics port, which Prometheus scrapes.
    metrics_port = str(BridgeSettings.model_fields["metrics_port"].default)
    assert f"127.0.0.1:{metrics_port}/metrics" in " ".join(bridge["healthcheck"]["test"])
    assert "sensorwatch_bridge_mqtt_connected 1" in " ".join(bridge["healthcheck"]["test"])
    assert f"--bridge-target bridge:{metrics_port}" in command(SERVICES["prometheus-init"])[-1]
    # The devices' logins are the sites of the very fleet the producer simulates.
    cmd = command(init)
    producer_env = environment(producer)
    assert cmd[:4] == ["python", "-m", "local_stack.compose_mqtt", "init"]
    assert cmd[cmd.index("--sensors") + 1] == producer_env["SENSORWATCH_SENSORS"]
    assert cmd[cmd.index("--seed") + 1] == producer_env["SENSORWATCH_SEED"]
    # The producer publishes once the bridge subscribed; Prometheus scrapes the bridge
    # once it is there; outside the profile neither waits for it.
    assert producer["depends_on"]["bridge"] == {"condition": "service_healthy", "required": False}
    assert SERVICES["prometheus-init"]["depends_on"]["bridge"]["required"] is False
    compose_producer = (PROJECT_ROOT / "scripts" / "compose-producer").read_text(encoding="utf-8")
    assert f"--mqtt-host mosquitto --mqtt-port {port}" in compose_producer
    assert f"--mqtt-credentials-dir {credentials}" in compose_producer


def run_compose_producer(tmp_path: Path, broker_on_the_network: bool) -> list[str]:
    """scripts/compose-producer with ``getent`` and ``python`` stand-ins on PATH: the
    command line it would start."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "getent").write_text(
        f'#!/bin/sh\n[ "$2" = mosquitto. ] && exit {0 if broker_on_the_network else 2}; exit 2\n'
    )
    (stubs / "python").write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    done = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "compose-producer")], capture_output=True, text=True,
        timeout=30, env={"PATH": f"{stubs}:/usr/bin:/bin"}, check=True,
    )  # fmt: skip
    return done.stdout.splitlines()


def test_the_producer_writes_to_kafka_unless_the_mqtt_profile_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`docker compose up` as before: the producer writes to Kafka. With the mqtt profile
    (its broker on the network) it publishes as the devices, with the logins init made,
    and the producer takes that command line with its compose environment."""
    from local_stack.compose_mqtt import CREDENTIALS_DIR
    from producer.cli import read_command_line

    (tmp_path / "kafka").mkdir()
    (tmp_path / "mqtt").mkdir()
    assert run_compose_producer(tmp_path / "kafka", broker_on_the_network=False) == [
        "-m", "producer",
    ]  # fmt: skip
    over_mqtt = run_compose_producer(tmp_path / "mqtt", broker_on_the_network=True)
    assert over_mqtt[:2] == ["-m", "producer"]

    for key in [k for k in os.environ if k.startswith("SENSORWATCH_")]:
        monkeypatch.delenv(key)
    for key, value in environment(SERVICES["producer"]).items():
        if value:
            monkeypatch.setenv(key, local_path(value, tmp_path))
    flags = read_command_line(over_mqtt[2:])
    assert Path(flags["mqtt_credentials_dir"]) == CREDENTIALS_DIR
    flags["mqtt_credentials_dir"] = tmp_path  # the volume, here
    settings = load_settings(ProducerSettings, flags)
    assert settings.transport == "mqtt"
    assert (settings.mqtt_host, settings.mqtt_port) == ("mosquitto", 1883)


def test_mosquitto_init_makes_a_login_per_device_of_the_fleet(tmp_path: Path) -> None:
    """What mosquitto-init writes: a login for the bridge and for each device the producer
    logs in as (producer/mqtt_sender.py's routes), kept across runs; the password file
    with every one of them, the ACL, and a config that listens beyond loopback, reads its
    files where the broker mounts them and says nothing of a user to switch to; a TLS
    listener whose certificate, made once, names the broker as its clients reach it."""
    from contract.devices import TopicLayout
    from local_stack.compose_mqtt import PORT, TLS_PORT, init
    from local_stack.mosquitto import BRIDGE_USER
    from producer.fleet import build_fleet
    from producer.mqtt_sender import routes_of

    broker, credentials = tmp_path / "broker", tmp_path / "credentials"
    broker.mkdir()
    credentials.mkdir()
    devices, new = init(50, 42, TopicLayout(), broker, credentials)
    passwords = {p.name: p.read_text(encoding="utf-8") for p in credentials.iterdir()}
    certificate = (broker / "tls" / "broker.pem").read_text(encoding="utf-8")
    again, new_again = init(50, 42, TopicLayout(), broker, credentials)
    fleet = {sensor.sensor_id: sensor.site for sensor in build_fleet(50, 42)}
    settings = load_settings(ProducerSettings, {"transport": "mqtt", "mqtt_password": "x"})
    config = (broker / "mosquitto.conf").read_text(encoding="utf-8").splitlines()

    assert devices == again == sorted({r.device for r in routes_of(fleet, settings).values()})
    assert sorted(new) == sorted([BRIDGE_USER, *devices]) and new_again == []
    assert {p.name: p.read_text(encoding="utf-8") for p in credentials.iterdir()} == passwords
    assert oct(credentials.stat().st_mode & 0o777) == "0o700"
    passwd = (broker / "passwd").read_text(encoding="utf-8").splitlines()
    assert sorted(line.split(":")[0] for line in passwd) == sorted(passwords)
    assert oct((broker / "passwd").stat().st_mode & 0o777) == "0o600"
    assert all(password not in "\n".join(passwd) for password in passwords.values())
    assert "pattern write sensors/%u/+/readings" in (broker / "acl").read_text(encoding="utf-8")
    assert f"listener {PORT} 0.0.0.0" in config
    assert f"password_file {broker}/passwd" in config and f"acl_file {broker}/acl" in config
    assert "persistence true" in config and (broker / "data").is_dir()
    assert not [line for line in config if line.startswith("user ")]
    tls = config[config.index(f"listener {TLS_PORT} 0.0.0.0") :]
    assert tls[1:4] == [
        f"certfile {broker}/tls/broker.pem",
        f"keyfile {broker}/tls/broker.key",
        f"cafile {broker}/tls/ca.pem",
    ]
    assert (broker / "tls" / "broker.pem").read_text(encoding="utf-8") == certificate
    names = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName"],
        input=certificate, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "DNS:mosquitto" in names and "DNS:localhost" in names and "IP Address:127.0.0.1" in names
