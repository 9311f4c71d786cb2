"""The Dockerfile, parsed with BuildKit's own parser (the ``dockerfile`` package), and the
.dockerignore that decides what the build sees."""

from __future__ import annotations

import fnmatch
import re
import shlex
import subprocess
import sys
import tomllib

import dockerfile
import pytest
import yaml

from server.cli import build_parser
from tests.deploy.helpers import CHART, ROOT

DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[dockerfile.Command]:
    return list(dockerfile.parse_file(str(DOCKERFILE)))


def stages() -> list[list[dockerfile.Command]]:
    """The instructions of each build stage (global ARGs before the first FROM left out)."""
    result: list[list[dockerfile.Command]] = []
    for command in instructions():
        if command.cmd == "FROM":
            result.append([])
        if result:
            result[-1].append(command)
    return result


def final_stage() -> list[dockerfile.Command]:
    return stages()[-1]


def one(stage: list[dockerfile.Command], cmd: str) -> dockerfile.Command:
    found = [c for c in stage if c.cmd == cmd]
    assert len(found) == 1, f"expected one {cmd}, found {len(found)}"
    return found[0]


def arg_defaults(stage: list[dockerfile.Command]) -> dict[str, str]:
    defaults = {}
    for command in stage:
        if command.cmd == "ARG" and "=" in command.value[0]:
            name, value = command.value[0].split("=", 1)
            defaults[name] = value
    return defaults


def expand(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables[m.group(1) or m.group(2)], text)


def test_multi_stage_on_python_slim():
    all_stages = stages()
    assert len(all_stages) >= 2
    base = arg_defaults(instructions()[:1])["PYTHON_IMAGE"]
    assert base.startswith("python:3.11-slim")
    for stage in all_stages:
        assert stage[0].value[0] == "${PYTHON_IMAGE}"
    names = [stage[0].value[2] for stage in all_stages]
    copy = [c for c in final_stage() if c.cmd == "COPY" and c.flags]
    assert copy[0].flags == ("--from=" + names[0],)
    assert copy[0].value == ("/opt/sluice", "/opt/sluice")


def test_runs_as_a_non_root_user_matching_the_chart():
    stage = final_stage()
    user = expand(one(stage, "USER").value[0], arg_defaults(stage))
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0, "a numeric uid lets runAsNonRoot verify it"
    assert gid.isdigit() and int(gid) > 0
    # USER comes after every RUN of the final stage, so nothing after it runs as root.
    commands = [c.cmd for c in stage]
    assert commands.index("USER") > max(i for i, c in enumerate(commands) if c == "RUN")
    pod = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    assert (pod["runAsUser"], pod["runAsGroup"]) == (int(uid), int(gid))


def test_runtime_has_java_and_the_jdbc_driver():
    run = " ".join(" ".join(c.value) for c in final_stage() if c.cmd == "RUN")
    words = run.split()
    assert "--no-install-recommends" in words
    for package in ("openjdk-17-jre-headless", "libpostgresql-jdbc-java", "tini"):
        assert package in words
    assert "rm -rf /var/lib/apt/lists/*" in run
    assert "test -f /usr/share/java/postgresql.jar" in run


def test_default_command_is_the_api_and_the_health_check_probes_it():
    stage = final_stage()
    entrypoint = one(stage, "ENTRYPOINT")
    assert entrypoint.json and entrypoint.value == ("/usr/bin/tini", "--")
    cmd = one(stage, "CMD")
    assert cmd.json and cmd.value[0] == "sluice"
    args = build_parser().parse_args(list(cmd.value[1:]))
    assert args.command == "api"
    healthcheck = one(stage, "HEALTHCHECK")
    assert healthcheck.json and healthcheck.value[:3] == ("CMD", "python", "-c")
    code = healthcheck.value[3]
    compile(code, "<healthcheck>", "exec")
    assert f"http://127.0.0.1:{args.port}/admin/v2/brokers/health" in code
    flags = dict(f.lstrip("-").split("=") for f in healthcheck.flags)
    assert set(flags) == {"interval", "timeout", "start-period", "retries"}
    assert str(args.port) in one(stage, "EXPOSE").value


def test_environment_points_at_the_image_folders():
    env_commands = [c for c in final_stage() if c.cmd == "ENV"]
    pairs = {}
    for command in env_commands:
        values = list(command.value)
        pairs.update(zip(values[::2], values[1::2], strict=True))
    assert pairs["PATH"].startswith("/opt/sluice/bin:")
    assert pairs["SLUICE_LAKE_PATH"].startswith(pairs["SLUICE_DATA_DIR"])
    assert one(final_stage(), "WORKDIR").value == (pairs["SLUICE_DATA_DIR"],)
    run = " ".join(" ".join(c.value) for c in final_stage() if c.cmd == "RUN")
    assert f"install -d -o sluice -g sluice -m 0750 {pairs['SLUICE_DATA_DIR']}" in run


def test_dependency_layer_lists_the_project_requirements(tmp_path):
    """The build stage installs the dependencies from pyproject.toml before the code: run the
    very command it uses and compare."""
    run = next(c for c in stages()[0] if c.cmd == "RUN" and "tomllib" in c.value[0])
    command = run.value[0].split(" > ", 1)[0]
    argv = shlex.split(command)
    assert argv[:2] == ["python", "-c"]
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    (tmp_path / "client").mkdir()
    client_toml = ROOT / "client" / "pyproject.toml"
    (tmp_path / "client" / "pyproject.toml").write_bytes(client_toml.read_bytes())
    output = subprocess.run(
        [sys.executable, "-c", argv[2]], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    client = tomllib.loads(client_toml.read_text())["project"]
    extras = project["optional-dependencies"]
    # The server's own dependency is the client, whose dependencies are listed instead.
    assert project["dependencies"] == ["sluice-client==0.1.0"]
    expected = client["dependencies"] + extras["server"] + extras["reports"]
    assert output == [d.replace(" ", "") for d in expected]
    copies = [c.value for c in stages()[0] if c.cmd == "COPY"]
    assert ("client/pyproject.toml", "client/README.md", "./client/") in copies


def _ignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes) or (
            pattern.startswith("**/") and any(fnmatch.fnmatch(p, pattern[3:]) for p in parts)
        ):
            ignored = not negate
    return ignored


@pytest.fixture(scope="module")
def ignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_dockerignore_keeps_the_packages_and_drops_the_rest(ignore_patterns):
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {p.rstrip("*") for p in setuptools["packages"]["find"]["include"]}
    packages.add("sluice")  # the client distribution's (client/pyproject.toml)
    present = [p for p in sorted(packages) if (ROOT / p).is_dir()]
    assert {"api", "models", "workers", "sluice", "migrations"} <= set(present)
    for package in present:
        assert not _ignored(f"{package}/__init__.py", ignore_patterns), package
    for needed in ("pyproject.toml", "README.md", "client/pyproject.toml", "client/README.md"):
        assert not _ignored(needed, ignore_patterns), needed
    for dropped in (".git", ".venv/bin/python", "tests/conftest.py", "data/sluice.db", "helm"):
        assert _ignored(dropped, ignore_patterns), dropped
    assert _ignored("api/__pycache__/app.cpython-311.pyc", ignore_patterns)
