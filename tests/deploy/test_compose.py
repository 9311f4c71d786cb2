"""docker-compose.yml: valid against the Compose specification, and wired the way Sluice needs
(health checks, start order, scalable workers, named volumes, every setting from the
environment), with and without the ``cluster`` profile (six Redis Cluster nodes, the job that
joins them, and ``redis-cluster.env`` that selects it) and the ``secured`` profile
(``secured.env``: authentication on, Redis loading the ACL file ``sluice redis-acl-file`` writes,
each service connecting as its own Redis user)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import compose_spec
import pytest
import redis
import yaml
from sqlalchemy.engine import make_url

from models.settings import Settings
from reports.celery_app import make_celery
from server.cli import build_parser, main
from server.embedded_redis import free_port
from tests.deploy.helpers import ROOT

COMPOSE = ROOT / "docker-compose.yml"
CLUSTER_ENV = ROOT / "redis-cluster.env"
SECURED_ENV = ROOT / "secured.env"
SECURED_SERVICES = ("secured-init",)
OBSERVABILITY_SERVICES = ("prometheus", "grafana")
# The Redis user each Sluice service connects as with the secured profile.
REDIS_USERS = {
    "api": "sluice-api",
    "worker": "sluice-worker",
    "celery-worker": "sluice-reports",
    "celery-beat": "sluice-reports",
}
# What an operator adds to secured.env (in .env): the service users' passwords.
REDIS_PASSWORDS = {
    "SLUICE_REDIS_API_PASSWORD": "api-pw-1",
    "SLUICE_REDIS_WORKER_PASSWORD": "worker-pw-2",
    "SLUICE_REDIS_REPORTS_PASSWORD": "reports-pw-3",
}
SLUICE_SERVICES = ("migrate", "api", "worker", "celery-worker", "celery-beat")
LONG_RUNNING = ("api", "worker", "celery-worker", "celery-beat")
CLUSTER_NODES = tuple(f"redis-node-{n}" for n in range(1, 7))
CLUSTER_SERVICES = (*CLUSTER_NODES, "redis-cluster-create")
# Celery's own variables (read by Celery itself, before its configuration).
CELERY_VARIABLES = {"CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}
# Settings read by processes but declared outside models/settings.py until the security work
# lands there (api/auth.py reads them).
AUTH_SETTINGS = {
    "SLUICE_AUTHENTICATION_ENABLED",
    "SLUICE_AUTHORIZATION_ENABLED",
    "SLUICE_SUPER_USER_ROLES",
    "SLUICE_TOKEN_SECRET_KEY_FILE",
    "SLUICE_TOKEN_PUBLIC_KEY_FILE",
}

# Compose interpolation: $$ is a literal $, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default},
# ${VAR:+replacement}, ${VAR+replacement}; defaults and replacements may nest.
_BRACED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-+])(.*))?", re.DOTALL)
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _substitute(text: str, environ: dict[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
        elif text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("${", i):
            depth, j = 0, i + 1
            while True:  # the matching brace (a missing one is an error, as in Compose)
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            braced = _BRACED.fullmatch(text[i + 2 : j])
            assert braced, f"not a Compose variable: {text[i : j + 1]!r}"
            name, operator, argument = braced.group(1), braced.group(2), braced.group(3) or ""
            value = environ.get(name)
            if operator == ":-":
                out.append(value or _substitute(argument, environ))
            elif operator == "-":
                out.append(value if value is not None else _substitute(argument, environ))
            elif operator == ":+":
                out.append(_substitute(argument, environ) if value else "")
            elif operator == "+":
                out.append(_substitute(argument, environ) if value is not None else "")
            else:
                out.append(value or "")
            i = j + 1
        else:
            bare = _BARE.match(text, i + 1)
            if bare:
                out.append(environ.get(bare.group(0), ""))
                i = bare.end()
            else:
                out.append("$")
                i += 1
    return "".join(out)


def interpolate(value: Any, environ: dict[str, str]) -> Any:
    """``value`` with variables substituted as ``docker compose`` does after parsing."""
    if isinstance(value, dict):
        return {k: interpolate(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ) for v in value]
    if not isinstance(value, str):
        return value
    return _substitute(value, environ)


def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def resolved(environ: dict[str, str] | None = None) -> dict[str, Any]:
    return interpolate(raw(), environ or {})


def services() -> dict[str, dict[str, Any]]:
    return resolved()["services"]


def env_file(path) -> dict[str, str]:
    """The variables of a Compose ``--env-file`` (``NAME=value`` lines, ``#`` comments)."""
    variables = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            variables[name.strip()] = value.strip()
    return variables


def with_profile(config: dict[str, Any], profiles: set[str]) -> dict[str, dict[str, Any]]:
    """The services ``docker compose`` starts with ``profiles`` on."""
    return {
        name: service
        for name, service in config["services"].items()
        if not service.get("profiles") or set(service["profiles"]) & profiles
    }


def test_is_valid_against_the_compose_specification():
    spec = compose_spec.PyCompose.from_json(json.dumps(resolved()))
    spec.validate()
    assert set(spec.service_names()) == {
        "postgres",
        "redis",
        *SLUICE_SERVICES,
        *CLUSTER_SERVICES,
        *SECURED_SERVICES,
        *OBSERVABILITY_SERVICES,
    }
    with_cluster = compose_spec.PyCompose.from_json(json.dumps(resolved(env_file(CLUSTER_ENV))))
    with_cluster.validate()
    secured = resolved(env_file(SECURED_ENV) | REDIS_PASSWORDS)
    compose_spec.PyCompose.from_json(json.dumps(secured)).validate()


def test_the_default_services_are_those_without_a_profile():
    config = resolved()
    assert set(with_profile(config, set())) == {"postgres", "redis", *SLUICE_SERVICES}
    everything = {"cluster", "secured", "observability"}
    assert set(with_profile(config, everything)) == set(config["services"])
    for name in CLUSTER_SERVICES:
        assert config["services"][name]["profiles"] == ["cluster"], name
    for name in OBSERVABILITY_SERVICES:
        assert config["services"][name]["profiles"] == ["observability"], name
    for name in SECURED_SERVICES:
        assert config["services"][name]["profiles"] == ["secured"], name


def test_specification_check_rejects_a_wrong_condition():
    broken = resolved()
    broken["services"]["api"]["depends_on"]["migrate"]["condition"] = "service_finished"
    with pytest.raises(ValueError, match="service_finished"):
        compose_spec.PyCompose.from_json(json.dumps(broken)).validate()


def test_postgres_and_redis_have_health_checks_and_volumes():
    svc = services()
    postgres, redis = svc["postgres"], svc["redis"]
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert "redis-data:/data" in redis["volumes"]


def test_every_long_running_service_has_a_health_check():
    svc = services()
    for name in ("postgres", "redis", *LONG_RUNNING):
        check = svc[name]["healthcheck"]
        assert not check.get("disable"), name
        assert check["test"][0] in {"CMD", "CMD-SHELL"}, name
    assert svc["migrate"]["healthcheck"] == {"disable": True}


def test_start_order_waits_for_health_and_the_migration():
    svc = services()
    for name, service in svc.items():
        for dependency, wait in service.get("depends_on", {}).items():
            assert dependency in svc, f"{name} depends on unknown {dependency}"
            condition = wait["condition"]
            if condition == "service_healthy":
                assert not svc[dependency]["healthcheck"].get("disable")
            elif condition == "service_completed_successfully":
                assert dependency in {"migrate", "redis-cluster-create", "secured-init"}
                assert svc[dependency]["restart"] == "no"
            else:
                pytest.fail(f"{name} waits for {dependency} only to start ({condition})")
            # A service of the default set may only wait for a profiled one optionally.
            if not service.get("profiles") and svc[dependency].get("profiles"):
                assert wait.get("required") is False, (name, dependency)
    assert svc["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert svc["migrate"]["restart"] == "no"
    for name in LONG_RUNNING:
        depends = svc[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert depends["redis"] == {"condition": "service_healthy"}


def test_workers_can_be_scaled():
    svc = services()
    for name, service in svc.items():
        assert "container_name" not in service, name
    worker = svc["worker"]
    assert "ports" not in worker  # a fixed host port would clash at --scale worker=3
    assert "SLUICE_WORKER_ID" not in worker["environment"]  # one id per replica
    assert "deploy" not in worker or "replicas" not in worker["deploy"]


def test_named_volumes_are_declared_and_used():
    config = resolved()
    declared = set(config["volumes"])
    nodes = {f"{node}-data" for node in CLUSTER_NODES}
    observability = {"prometheus-data", "grafana-data"}
    assert declared == {
        *("postgres-data", "redis-data", "lake", "redis-acl", "sluice-keys"),
        *nodes,
        *observability,
    }
    used = set()
    for service in config["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert not source.startswith((".", "/")), "bind mounts make the file host-bound"
            assert source in declared
            used.add(source)
    assert used == declared
    lake_path = config["services"]["celery-worker"]["environment"]["SLUICE_LAKE_PATH"]
    assert f"lake:{lake_path}" in config["services"]["celery-worker"]["volumes"]


def test_every_setting_comes_from_the_environment_with_a_default():
    fields = Settings.model_fields
    known = {f"SLUICE_{name.upper()}" for name in fields} | {"DATABASE_URL", "REDIS_URL"}
    known |= AUTH_SETTINGS | CELERY_VARIABLES
    for name in SLUICE_SERVICES:
        environment = raw()["services"][name]["environment"]
        assert {"DATABASE_URL", "REDIS_URL", "SLUICE_CLUSTER_NAME"} <= set(environment)
        for variable, value in environment.items():
            assert variable in known, f"{variable} is not a Sluice setting"
            # (A default may hold variables of its own, as REDIS_URL's does.)
            assert re.fullmatch(rf"\$\{{{variable}:-.*\}}", value, re.DOTALL), (variable, value)


def test_defaults_connect_to_the_bundled_servers():
    config = resolved()
    postgres = config["services"]["postgres"]["environment"]
    for name in SLUICE_SERVICES:
        environment = config["services"][name]["environment"]
        database = make_url(environment["DATABASE_URL"])
        assert database.drivername == "postgresql+psycopg"
        assert database.host == "postgres"
        assert (database.username, database.password, database.database) == (
            postgres["POSTGRES_USER"],
            postgres["POSTGRES_PASSWORD"],
            postgres["POSTGRES_DB"],
        )
        assert environment["REDIS_URL"].startswith("redis://redis:6379/")


def test_defaults_make_valid_settings(monkeypatch):
    environment = resolved()["services"]["worker"]["environment"]
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    settings = Settings(_env_file=None)
    assert settings.report_schedule == "*/15 * * * *"
    assert settings.spark_master == "local[*]"
    assert settings.worker_http_port == 8081
    assert settings.stats_interval_seconds == 10


def test_environment_overrides_the_defaults():
    config = resolved({"SLUICE_CLUSTER_NAME": "eu-1", "REDIS_URL": "rediss://:pw@cache:6380/2"})
    environment = config["services"]["api"]["environment"]
    assert environment["SLUICE_CLUSTER_NAME"] == "eu-1"
    assert environment["REDIS_URL"] == "rediss://:pw@cache:6380/2"


def test_commands_are_real_sluice_and_celery_commands():
    svc = services()
    parser = build_parser()
    assert parser.parse_args(svc["migrate"]["command"][1:]).command == "migrate"
    assert parser.parse_args(svc["worker"]["command"][1:]).command == "worker"
    api = parser.parse_args(svc["api"]["command"][1:])
    assert (api.command, api.host, api.port) == ("api", "0.0.0.0", 8080)
    assert svc["api"]["ports"] == ["8080:8080"]
    assert svc["celery-worker"]["command"] == [
        "celery",
        "-A",
        "reports.celery_app:app",
        "worker",
        "--loglevel=INFO",
    ]
    assert svc["celery-beat"]["command"][:4] == ["celery", "-A", "reports.celery_app:app", "beat"]


def _python_check(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    compile(test[3], "<healthcheck>", "exec")
    return test[3]


def test_http_health_checks_hit_the_real_endpoints():
    svc = services()
    assert "http://127.0.0.1:8080/admin/v2/brokers/ready" in _python_check(svc["api"])
    worker = _python_check(svc["worker"])
    assert "SLUICE_WORKER_HTTP_PORT" in worker
    assert "/readyz" in worker


def test_celery_health_checks():
    svc = services()
    ping = svc["celery-worker"]["healthcheck"]["test"]
    assert ping[0] == "CMD-SHELL"
    assert "celery -A reports.celery_app:app inspect ping" in ping[1]
    assert '-d "celery@${HOSTNAME}"' in ping[1]  # $$ in the file: the shell expands it
    beat = svc["celery-beat"]["healthcheck"]["test"]
    assert beat[:3] == ["CMD", "pgrep", "-f"]
    pattern = re.compile(beat[3])
    # The pattern finds beat's Python process but not tini (PID 1) nor a Celery worker.
    assert pattern.search(
        "/opt/sluice/bin/python /opt/sluice/bin/celery -A reports.celery_app:app beat"
    )
    assert not pattern.search("/usr/bin/tini -- celery -A reports.celery_app:app beat")
    assert not pattern.search("/opt/sluice/bin/python /opt/sluice/bin/celery -A x worker")


# --- the cluster profile -------------------------------------------------------------------


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_cluster_profile_has_six_cluster_nodes():
    svc = services()
    volumes = set()
    for name in CLUSTER_NODES:
        node = svc[name]
        command = node["command"]
        assert command[0] == "redis-server"
        assert _option(command, "--cluster-enabled") == "yes"
        assert _option(command, "--appendonly") == "yes"
        # Redirections name the node by its service name, which the network resolves.
        assert _option(command, "--cluster-announce-hostname") == name
        assert _option(command, "--cluster-preferred-endpoint-type") == "hostname"
        assert node["image"] == svc["redis"]["image"]
        assert node["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
        assert "ports" not in node  # reachable inside the Compose network only
        (volume,) = node["volumes"]
        assert volume.endswith(":/data")
        volumes.add(volume)
    assert len(volumes) == len(CLUSTER_NODES)


@contextmanager
def compose_redis(command: list[str], tmp_path, *options: str) -> Iterator[tuple[int, Any]]:
    """A compose file's ``redis-server`` command run by the installed redis-server, on a free
    port (``options`` after it), bound to localhost, in ``tmp_path``: its port and process,
    killed afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    local = ["--port", str(port), *options, "--bind", "127.0.0.1", "--dir", str(tmp_path)]
    process = subprocess.Popen(
        [binary, *command[1:], *local], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield port, process
    finally:
        process.kill()
        process.wait()


def answering(process: subprocess.Popen, ask: Callable[[], Any], refused: str) -> Any:
    """What ``ask()`` answers once the server started by ``process`` takes connections
    (``refused``: the failure when it exits first)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return ask()
        except redis.ConnectionError:
            assert process.poll() is None, refused
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)


@pytest.fixture
def node_server(tmp_path):
    """The installed redis-server, started with a cluster node's command from the file."""
    command = services()["redis-node-1"]["command"]
    # Free ports only, the cluster bus's included (by default the port plus 10,000).
    with compose_redis(command, tmp_path, "--cluster-port", str(free_port())) as (port, process):
        client = redis.Redis(port=port, decode_responses=True)
        try:
            answering(process, client.ping, "redis-server refused the node's command")
            yield client
        finally:
            client.close()


def test_a_node_command_starts_a_cluster_node(node_server):
    # Every option of the node's command is one redis-server 7 knows, and makes a cluster node.
    assert node_server.info("cluster")["cluster_enabled"] == 1
    assert node_server.config_get("cluster-announce-hostname") == {
        "cluster-announce-hostname": "redis-node-1"
    }
    assert node_server.config_get("cluster-preferred-endpoint-type") == {
        "cluster-preferred-endpoint-type": "hostname"
    }
    assert node_server.config_get("appendonly") == {"appendonly": "yes"}


def test_cluster_create_job_joins_every_node_once():
    svc = services()
    job = svc["redis-cluster-create"]
    assert job["restart"] == "no"
    assert job["image"] == svc["redis"]["image"]
    assert job["depends_on"] == {name: {"condition": "service_healthy"} for name in CLUSTER_NODES}
    shell, flag, script = job["command"]
    assert (shell, flag) == ("sh", "-c")
    # The script as the container's shell gets it ($$ is $ once Compose has read the file).
    check = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    loop = re.search(r"^for node in (.+); do$", script, re.MULTILINE)
    assert loop and tuple(loop.group(1).split()) == CLUSTER_NODES
    create = next(line.split() for line in script.splitlines() if "--cluster create" in line)
    assert create[:4] == ["exec", "redis-cli", "--cluster", "create"]
    assert _option(create, "--cluster-replicas") == "1"
    assert "--cluster-yes" in create
    # A cluster made before is left alone, so a second `up` does not fail on it.
    assert "cluster_slots_assigned:16384" in script


def test_sluice_services_wait_for_the_cluster_only_when_it_is_on():
    svc = services()
    for name in LONG_RUNNING:
        assert svc[name]["depends_on"]["redis-cluster-create"] == {
            "condition": "service_completed_successfully",
            "required": False,
        }
    assert "redis-cluster-create" not in svc["migrate"]["depends_on"]  # PostgreSQL only


def test_cluster_env_file_selects_the_profile_and_points_sluice_at_a_node(monkeypatch):
    variables = env_file(CLUSTER_ENV)
    assert variables["COMPOSE_PROFILES"] == "cluster"
    config = resolved(variables)
    running = with_profile(config, set(variables["COMPOSE_PROFILES"].split(",")))
    assert set(CLUSTER_SERVICES) <= set(running)
    for name in SLUICE_SERVICES:
        environment = config["services"][name]["environment"]
        data_plane = urlsplit(environment["REDIS_URL"])
        assert data_plane.hostname in CLUSTER_NODES and data_plane.port == 6379
        # Celery stays on the single Redis, which runs with the profile too.
        for variable in CELERY_VARIABLES:
            assert urlsplit(environment[variable]).hostname == "redis", variable
    assert "redis" in running

    # What the processes make of that environment: Sluice's data plane on the node, Celery's
    # broker and results on `redis`.
    for variable, value in config["services"]["celery-worker"]["environment"].items():
        monkeypatch.setenv(variable, value)
    settings = Settings(_env_file=None)
    assert settings.effective_redis_url == variables["REDIS_URL"]
    celery = make_celery(settings)
    assert celery.conf.broker_url == variables["CELERY_BROKER_URL"]
    assert celery.conf.result_backend == variables["CELERY_RESULT_BACKEND"]


def test_without_the_profile_celery_follows_redis_url(monkeypatch):
    environment = resolved({"REDIS_URL": "redis://cache:6380/3"})["services"]["celery-beat"]
    for variable, value in environment["environment"].items():
        monkeypatch.setenv(variable, value)
    assert environment["environment"]["CELERY_BROKER_URL"] == ""
    celery = make_celery(Settings(_env_file=None))
    assert celery.conf.broker_url == "redis://cache:6380/3"
    assert celery.conf.result_backend == "redis://cache:6380/3"


# --- the secured profile: authentication on, data-plane ACLs ---------------------------------


def _secured() -> tuple[dict[str, str], dict[str, Any]]:
    variables = env_file(SECURED_ENV) | REDIS_PASSWORDS
    return variables, resolved(variables)


def test_secured_env_selects_the_profile_and_turns_authentication_on():
    variables = env_file(SECURED_ENV)
    assert variables["COMPOSE_PROFILES"] == "secured"
    assert variables["SLUICE_AUTHENTICATION_ENABLED"] == "true"
    assert variables["SLUICE_AUTHORIZATION_ENABLED"] == "true"
    # The passwords are the operator's to choose: the committed file holds none.
    assert not set(REDIS_PASSWORDS) & set(variables)
    variables, config = _secured()
    running = with_profile(config, set(variables["COMPOSE_PROFILES"].split(",")))
    assert set(SECURED_SERVICES) <= set(running)
    api = config["services"]["api"]
    assert api["environment"]["SLUICE_AUTHENTICATION_ENABLED"] == "true"
    # The admin service gives clients the Redis they reach in this network, no credentials.
    assert api["environment"]["SLUICE_DATAPLANE_URL"] == "redis://redis:6379/0"
    # The token key secured-init makes is in the volume the API reads.
    key = api["environment"]["SLUICE_TOKEN_SECRET_KEY_FILE"]
    assert key.startswith("/etc/sluice/keys/")
    assert "sluice-keys:/etc/sluice/keys:ro" in api["volumes"]
    assert api["depends_on"]["secured-init"] == {
        "condition": "service_completed_successfully",
        "required": False,
    }


def test_secured_services_connect_as_their_own_redis_users(monkeypatch):
    _, config = _secured()
    for name, user in REDIS_USERS.items():
        url = urlsplit(config["services"][name]["environment"]["REDIS_URL"])
        service = user.removeprefix("sluice-").upper()
        assert (url.username, url.password) == (
            user,
            REDIS_PASSWORDS[f"SLUICE_REDIS_{service}_PASSWORD"],
        ), name
        assert (url.hostname, url.port, url.path) == ("redis", 6379, "/0")
    # Celery follows REDIS_URL: the report worker's broker and results as sluice-reports.
    for variable, value in config["services"]["celery-worker"]["environment"].items():
        monkeypatch.setenv(variable, value)
    celery = make_celery(Settings(_env_file=None))
    assert urlsplit(celery.conf.broker_url).username == "sluice-reports"
    assert urlsplit(celery.conf.result_backend).username == "sluice-reports"
    # No service's environment holds another's password (secured-init holds them all).
    for name in SLUICE_SERVICES:
        environment = config["services"][name]["environment"]
        assert not set(REDIS_PASSWORDS) & set(environment), name


def test_without_the_secured_profile_redis_and_the_urls_are_as_before():
    svc = services()
    for name in REDIS_USERS:
        assert svc[name]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    assert svc["api"]["environment"]["SLUICE_DATAPLANE_URL"] == ""
    command = svc["redis"]["command"]
    assert _option(command, "--aclfile") == ""  # an empty ACL file name is none
    # Passwords alone (say, in .env) change nothing: only secured.env's ACL file does.
    config = resolved(REDIS_PASSWORDS)
    for name in REDIS_USERS:
        assert config["services"][name]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    # A Redis of one's own still replaces the bundled one, for every service.
    mine = resolved({"REDIS_URL": "redis://u:p@cache:6380/1"} | env_file(SECURED_ENV))
    for name in REDIS_USERS:
        assert mine["services"][name]["environment"]["REDIS_URL"] == "redis://u:p@cache:6380/1"


def test_secured_redis_loads_the_file_secured_init_writes():
    variables, config = _secured()
    svc = config["services"]
    acl_file = _option(svc["redis"]["command"], "--aclfile")
    assert acl_file == variables["SLUICE_REDIS_ACL_FILE"]
    init = svc["secured-init"]
    assert init["environment"]["SLUICE_REDIS_ACL_FILE"] == acl_file
    mounts = {v.split(":")[1]: v for v in svc["redis"]["volumes"]}
    assert acl_file.startswith(mounts["/etc/redis-acl"].split(":")[1] + "/")
    assert mounts["/etc/redis-acl"] == "redis-acl:/etc/redis-acl:ro"
    assert "redis-acl:/etc/redis-acl" in init["volumes"]
    assert svc["redis"]["depends_on"]["secured-init"] == {
        "condition": "service_completed_successfully",
        "required": False,
    }
    # secured-init: a one-off, run as root for the chowns, with the three passwords.
    assert init["restart"] == "no"
    assert init["user"] == "0:0"
    assert init["healthcheck"] == {"disable": True}
    for variable, password in REDIS_PASSWORDS.items():
        assert init["environment"][variable] == password
    shell, flag, script = init["command"]
    assert (shell, flag) == ("sh", "-c")
    check = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert script.startswith("set -eu\n")
    commands = [
        shlex.split(line) for line in script.splitlines() if line.strip().startswith("sluice ")
    ]
    parser = build_parser()
    parsed = [parser.parse_args(words[1:]) for words in commands]
    assert [p.command for p in parsed] == ["redis-acl-file", "tokens"]
    assert commands[0][-2:] == ["--output", "$SLUICE_REDIS_ACL_FILE"]
    assert 'chown "$REDIS_UID:$REDIS_UID" "$SLUICE_REDIS_ACL_FILE"' in script
    assert init["environment"]["REDIS_UID"] == "999"  # the redis image's redis user


@pytest.fixture
def secured_redis(tmp_path, monkeypatch):
    """The bundled Redis's command from the file, with the ACL file that `secured-init`'s
    `sluice redis-acl-file` writes from its environment (paths and port made local)."""
    _, config = _secured()
    svc = config["services"]
    for variable, value in svc["secured-init"]["environment"].items():
        monkeypatch.setenv(variable, value)
    acl = tmp_path / "users.acl"
    assert main(["redis-acl-file", "--output", str(acl)]) == 0
    command = list(svc["redis"]["command"])
    command[command.index("--aclfile") + 1] = str(acl)
    with compose_redis(command, tmp_path) as (port, process):
        yield config, port, process


def test_secured_services_log_in_to_the_secured_redis(secured_redis):
    config, port, process = secured_redis
    for name, user in REDIS_USERS.items():
        url = config["services"][name]["environment"]["REDIS_URL"]
        client = redis.Redis.from_url(url.replace("@redis:6379", f"@127.0.0.1:{port}"))
        refused = "redis-server refused the command or the file"
        assert answering(process, client.acl_whoami, refused) == user, name
        client.close()
    # The health check's unauthenticated PING is answered (NOAUTH): the server is up.
    anonymous = redis.Redis(port=port)
    with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
        anonymous.ping()
    anonymous.close()


def test_the_default_redis_command_runs_without_an_acl_file(tmp_path):
    command = services()["redis"]["command"]
    with compose_redis(command, tmp_path) as (port, process):
        client = redis.Redis(port=port, decode_responses=True)
        try:
            # The default user, no password: as before.
            assert answering(process, client.ping, "redis-server refused the command") is True
            assert client.config_get("aclfile") == {"aclfile": ""}
            assert client.acl_whoami() == "default"
        finally:
            client.close()


def test_the_observability_profile_scrapes_sluice_and_loads_the_charts_dashboards():
    """Prometheus scrapes the admin service and every worker replica (Docker DNS), Grafana
    provisions it as its data source and loads the dashboards the Helm chart ships."""
    services = resolved()["services"]
    prometheus, grafana = services["prometheus"], services["grafana"]
    config = yaml.safe_load((ROOT / "observability" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["sluice-api"]["static_configs"][0]["targets"] == ["api:8080"]
    assert jobs["sluice-worker"]["dns_sd_configs"][0]["names"] == ["worker"]
    assert jobs["sluice-worker"]["dns_sd_configs"][0]["port"] == 8081
    configs = resolved()["configs"]

    def files(service: dict) -> dict[str, str]:
        return {
            c["target"]: str((ROOT / configs[c["source"]]["file"]).resolve())
            for c in service["configs"]
        }

    assert files(prometheus) == {
        "/etc/prometheus/prometheus.yml": str(ROOT / "observability" / "prometheus.yml")
    }
    provisioning = ROOT / "observability" / "grafana" / "provisioning"
    dashboard = ROOT / "helm" / "sluice" / "dashboards" / "sluice-overview.json"
    assert files(grafana) == {
        "/etc/grafana/provisioning/datasources/prometheus.yml": str(
            provisioning / "datasources" / "prometheus.yml"
        ),
        "/etc/grafana/provisioning/dashboards/sluice.yml": str(
            provisioning / "dashboards" / "sluice.yml"
        ),
        "/var/lib/grafana/dashboards/sluice/sluice-overview.json": str(dashboard),
    }
    provider = yaml.safe_load((provisioning / "dashboards" / "sluice.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards/sluice"
    source = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    assert source["datasources"][0]["url"] == "http://prometheus:9090"
