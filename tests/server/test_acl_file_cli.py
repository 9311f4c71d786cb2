"""``sluice redis-acl-file``: the file it writes is the one ``dataplane.acl`` renders, a real
``redis-server --aclfile`` loads it, and each user can do what its service needs and no more."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from dataplane.acl import render_acl_file
from server.acl_file import PASSWORD_VARIABLES
from server.cli import main
from server.embedded_redis import EmbeddedRedis

PASSWORDS = {"api": "api-Secret-1", "worker": "worker-Secret-2", "reports": "reports-Secret-3"}


@pytest.fixture
def password_env(monkeypatch) -> dict[str, str]:
    for service, variable in PASSWORD_VARIABLES.items():
        monkeypatch.setenv(variable, PASSWORDS[service])
    return PASSWORDS


def test_password_variables_are_the_documented_names():
    assert PASSWORD_VARIABLES == {
        "api": "SLUICE_REDIS_API_PASSWORD",
        "worker": "SLUICE_REDIS_WORKER_PASSWORD",
        "reports": "SLUICE_REDIS_REPORTS_PASSWORD",
    }


def test_writes_the_rendered_file_to_stdout(capsys, password_env):
    assert main(["redis-acl-file"]) == 0
    out = capsys.readouterr().out
    assert out == render_acl_file(PASSWORDS)
    assert out.splitlines()[0].startswith("user default off")


def test_writes_the_file_readable_by_its_owner_only(tmp_path, password_env):
    target = tmp_path / "acl" / "users.acl"
    assert main(["redis-acl-file", "--output", str(target)]) == 0
    assert target.read_text() == render_acl_file(PASSWORDS)
    assert target.stat().st_mode & 0o777 == 0o600
    # An existing, more open file is tightened, not only rewritten.
    target.chmod(0o644)
    assert main(["redis-acl-file", "-o", str(target)]) == 0
    assert target.stat().st_mode & 0o777 == 0o600


def test_password_files_take_precedence_over_the_environment(tmp_path, capsys, password_env):
    files = []
    for service in ("api", "worker", "reports"):
        path = tmp_path / f"{service}.password"
        path.write_text(f"from-file-{service}\n")  # the newline is not part of the password
        files += [f"--{service}-password-file", str(path)]
    assert main(["redis-acl-file", *files]) == 0
    expected = {s: f"from-file-{s}" for s in ("api", "worker", "reports")}
    assert capsys.readouterr().out == render_acl_file(expected)


@pytest.mark.parametrize("service", ["api", "worker", "reports"])
def test_a_missing_password_is_refused(tmp_path, capsys, monkeypatch, password_env, service):
    monkeypatch.delenv(PASSWORD_VARIABLES[service])
    target = tmp_path / "users.acl"
    assert main(["redis-acl-file", "--output", str(target)]) == 1
    err = capsys.readouterr().err
    assert PASSWORD_VARIABLES[service] in err
    assert f"sluice-{service}" in err
    assert not target.exists()
    monkeypatch.setenv(PASSWORD_VARIABLES[service], "")  # empty is missing too
    assert main(["redis-acl-file", "--output", str(target)]) == 1
    assert not target.exists()


def test_a_password_with_a_space_is_refused(capsys, monkeypatch, password_env):
    monkeypatch.setenv("SLUICE_REDIS_WORKER_PASSWORD", "two words")
    assert main(["redis-acl-file"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "worker password" in captured.err


# --- a real redis-server loads the file --------------------------------------------------------


@pytest.fixture
def acl_server(tmp_path, password_env) -> Iterator[EmbeddedRedis]:
    """A private redis-server started with ``--aclfile`` on the file the command wrote."""
    acl = tmp_path / "users.acl"
    assert main(["redis-acl-file", "--output", str(acl)]) == 0
    server = EmbeddedRedis(tmp_path / "redis", extra_args=("--aclfile", str(acl.resolve())))
    process = server.spawn()
    try:
        worker = _client(server, "worker")
        deadline = time.monotonic() + 10
        while True:
            try:
                worker.ping()
                break
            except redis.ConnectionError:
                assert process.poll() is None, _log(tmp_path / "redis")
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        worker.close()
        yield server
    finally:
        server.stop()


def _log(directory: Path) -> str:
    log = directory / "redis.log"
    return log.read_text() if log.exists() else "redis-server exited"


def _client(server: EmbeddedRedis, service: str | None) -> redis.Redis:
    if service is None:
        return redis.Redis(port=server.port, decode_responses=True)
    return redis.Redis(
        port=server.port,
        username=f"sluice-{service}",
        password=PASSWORDS[service],
        decode_responses=True,
    )


def test_redis_server_loads_the_file_with_the_default_user_off(acl_server):
    anonymous = _client(acl_server, None)
    with pytest.raises((redis.AuthenticationError, redis.ResponseError), match=r"(?i)auth"):
        anonymous.ping()
    anonymous.close()
    for service in PASSWORDS:
        client = _client(acl_server, service)
        assert client.ping() is True
        assert client.acl_whoami() == f"sluice-{service}"
        client.close()
    wrong = redis.Redis(port=acl_server.port, username="sluice-worker", password="nope")
    with pytest.raises(redis.AuthenticationError):
        wrong.ping()
    wrong.close()
    # Nobody gets in as the default user, whatever the password.
    default = redis.Redis(port=acl_server.port, username="default", password="")
    with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
        default.ping()
    default.close()


@pytest.mark.parametrize("service", ["worker", "reports"])
def test_service_users_run_data_commands_but_no_dangerous_ones(acl_server, service):
    client = _client(acl_server, service)
    try:
        assert client.xadd("sl:{t/n/x}:log", {"v": "1"})
        sha = client.script_load("return redis.call('XLEN', KEYS[1])")
        assert client.evalsha(sha, 1, "sl:{t/n/x}:log") >= 1
        client.publish("sl:wake", "x")
        for command in (("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("ACL", "LIST")):
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.execute_command(*command)
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.execute_command("ACL", "SETUSER", "intruder", "on", ">x", "+@all", "~*")
        assert client.exists("sl:{t/n/x}:log") == 1  # nothing was flushed
    finally:
        client.close()


def test_the_api_user_manages_session_users(acl_server):
    api = _client(acl_server, "api")
    try:
        assert api.execute_command("ACL", "SETUSER", "sl-session-t1", "on", ">pw", "+ping") in (
            "OK",
            b"OK",
            True,
        )
        assert "sl-session-t1" in api.execute_command("ACL", "USERS")
        assert api.execute_command("ACL", "GETUSER", "sl-session-t1")
        session = redis.Redis(port=acl_server.port, username="sl-session-t1", password="pw")
        assert session.ping() is True
        with pytest.raises(redis.exceptions.NoPermissionError):
            session.set("k", "v")
        session.close()
        assert api.execute_command("ACL", "DELUSER", "sl-session-t1") == 1
        # Managing users is all it may do of ACL and the dangerous commands.
        for command in (("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("ACL", "SAVE")):
            with pytest.raises(redis.exceptions.NoPermissionError):
                api.execute_command(*command)
    finally:
        api.close()
