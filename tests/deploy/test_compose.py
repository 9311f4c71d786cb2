"""docker-compose.yml: valid against the Compose specification, and wired the way Sluice needs
(health checks, start order, scalable workers, named volumes, every setting from the
environment)."""

from __future__ import annotations

import json
import re
from typing import Any

import compose_spec
import pytest
import yaml
from sqlalchemy.engine import make_url

from models.settings import Settings
from server.cli import build_parser
from tests.deploy.helpers import ROOT

COMPOSE = ROOT / "docker-compose.yml"
SLUICE_SERVICES = ("migrate", "api", "worker", "celery-worker", "celery-beat")
LONG_RUNNING = ("api", "worker", "celery-worker", "celery-beat")
# Settings read by processes but declared outside models/settings.py until the security work
# lands there (api/auth.py reads them).
AUTH_SETTINGS = {
    "SLUICE_AUTHENTICATION_ENABLED",
    "SLUICE_AUTHORIZATION_ENABLED",
    "SLUICE_SUPER_USER_ROLES",
    "SLUICE_TOKEN_SECRET_KEY_FILE",
    "SLUICE_TOKEN_PUBLIC_KEY_FILE",
}

# Compose interpolation: $$ is a literal $, ${VAR}, ${VAR:-default}, ${VAR-default}.
_VARIABLE = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|([A-Za-z_]\w*))")


def interpolate(value: Any, environ: dict[str, str]) -> Any:
    """``value`` with variables substituted as ``docker compose`` does after parsing."""
    if isinstance(value, dict):
        return {k: interpolate(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ) for v in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        operator, default = match.group(2), match.group(3) or ""
        if operator == ":-":
            return environ.get(name) or default
        if operator == "-":
            return environ.get(name, default)
        return environ.get(name, "")

    return _VARIABLE.sub(substitute, value)


def raw() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def resolved(environ: dict[str, str] | None = None) -> dict[str, Any]:
    return interpolate(raw(), environ or {})


def services() -> dict[str, dict[str, Any]]:
    return resolved()["services"]


def test_is_valid_against_the_compose_specification():
    spec = compose_spec.PyCompose.from_json(json.dumps(resolved()))
    spec.validate()
    assert set(spec.service_names()) == {"postgres", "redis", *SLUICE_SERVICES}


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
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in svc, f"{name} depends on unknown {dependency}"
            condition = condition["condition"]
            if condition == "service_healthy":
                assert not svc[dependency]["healthcheck"].get("disable")
            elif condition == "service_completed_successfully":
                assert dependency == "migrate"
            else:
                pytest.fail(f"{name} waits for {dependency} only to start ({condition})")
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
    assert declared == {"postgres-data", "redis-data", "lake"}
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
    known |= AUTH_SETTINGS
    for name in SLUICE_SERVICES:
        environment = raw()["services"][name]["environment"]
        assert {"DATABASE_URL", "REDIS_URL", "SLUICE_CLUSTER_NAME"} <= set(environment)
        for variable, value in environment.items():
            assert variable in known, f"{variable} is not a Sluice setting"
            assert re.fullmatch(rf"\$\{{{variable}:-[^}}]*\}}", value), (variable, value)


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
