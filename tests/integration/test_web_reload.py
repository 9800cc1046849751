"""The web config is live: a revoked password stops working when the file changes, a broken or
weakening file keeps the running config. (The SIGHUP path, end to end, is in test_agent_signals.py.)"""

from __future__ import annotations

import http.client
import logging
from pathlib import Path

import bcrypt
import pytest

from agent.web.config import load_web_config
from agent.web.server import AgentHTTPServer
from tests.support.web_harness import (
    BODY,
    Certs,
    StartServer,
    basic,
    certs,
    client_context,
    connection,
    get,
    make_certs,
    serve,
    tls_config_text,
    wait_for,
    write_web_config,
)

__all__ = ["certs", "serve"]  # fixtures

ALICE = bcrypt.hashpw(b"alice-pw", bcrypt.gensalt(rounds=4)).decode()
BOB = bcrypt.hashpw(b"bob-pw", bcrypt.gensalt(rounds=4)).decode()
POLL_S = 0.1


def users_text(**users: str) -> str:
    return "basic_auth_users:\n" + "".join(f"  {name}: {hashed}\n" for name, hashed in users.items())


def as_alice(server: AgentHTTPServer, **kwargs: object) -> int:
    return get(server.port, headers={"Authorization": basic("alice", "alice-pw")}, **kwargs)[0]  # type: ignore[arg-type]


def as_bob(server: AgentHTTPServer, **kwargs: object) -> int:
    return get(server.port, headers={"Authorization": basic("bob", "bob-pw")}, **kwargs)[0]  # type: ignore[arg-type]


@pytest.fixture
def live(serve: StartServer, tmp_path: Path) -> tuple[AgentHTTPServer, Path]:
    path = write_web_config(tmp_path, users_text(alice=ALICE))
    server = serve(load_web_config(path), web_config_file=str(path), reload_interval_s=POLL_S)
    assert (as_alice(server), as_bob(server)) == (200, 401)
    return server, path


def test_a_revoked_password_stops_working_when_the_file_changes(live: tuple[AgentHTTPServer, Path]) -> None:
    server, path = live
    write_web_config(path.parent, users_text(bob=BOB))
    assert wait_for(lambda: as_alice(server) == 401, timeout=5)
    assert as_bob(server) == 200


def test_a_kept_alive_connection_loses_a_revoked_password_too(live: tuple[AgentHTTPServer, Path]) -> None:
    server, path = live
    conn = connection(server.port)
    try:
        headers = {"Authorization": basic("alice", "alice-pw")}
        conn.request("GET", "/metrics", headers=headers)
        first = conn.getresponse()
        assert (first.status, first.read()) == (200, BODY)
        write_web_config(path.parent, users_text(bob=BOB))
        assert server.poll_web_files()
        conn.request("GET", "/metrics", headers=headers)  # same connection, next request
        assert conn.getresponse().status == 401
    finally:
        conn.close()


def test_an_edit_in_place_is_seen_too(live: tuple[AgentHTTPServer, Path]) -> None:
    server, path = live
    path.write_text(users_text(alice=ALICE, bob=BOB))  # not renamed: same inode, new mtime and size
    assert wait_for(lambda: as_bob(server) == 200, timeout=5)


@pytest.mark.parametrize("broken", [
    "basic_auth_users: [\n",  # half-written YAML
    "basic_auth_users:\n  alice: plaintext\n",  # not a bcrypt hash
    "basic_auth_users:\n  alice: $2b$14$" + "a" * 53 + "\n",  # too costly for a scrape
    "",  # an empty file would mean no auth at all
    "http_server_config:\n  headers: {X-Frame-Options: deny}\n",  # valid, but no users: auth off
])
def test_a_broken_or_weakening_file_keeps_the_running_config(live: tuple[AgentHTTPServer, Path], broken: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    server, path = live
    with caplog.at_level(logging.ERROR, logger="agent.web.server"):
        write_web_config(path.parent, broken)
        assert not server.poll_web_files()
    assert "keeping the running web config" in caplog.text
    assert as_alice(server) == 200
    assert get(server.port)[0] == 401  # never drops to no auth
    caplog.clear()
    assert not server.poll_web_files()  # unchanged since: reported once, not on every poll
    assert caplog.text == ""
    write_web_config(path.parent, users_text(bob=BOB))  # fixed: applies
    assert wait_for(lambda: as_bob(server) == 200, timeout=5)
    assert as_alice(server) == 401


def test_a_removed_file_keeps_the_running_config(live: tuple[AgentHTTPServer, Path]) -> None:
    server, path = live
    path.unlink()
    assert not server.poll_web_files()
    assert as_alice(server) == 200 and get(server.port)[0] == 401


def test_reload_on_request_applies_a_new_path(live: tuple[AgentHTTPServer, Path]) -> None:
    server, path = live
    other = write_web_config(path.parent, users_text(bob=BOB), name="other.yml")
    assert server.reload_web_config(str(other))
    assert (as_alice(server), as_bob(server)) == (401, 200)
    assert not server.reload_web_config(None)  # no file at all would switch auth off
    assert as_bob(server) == 200


def test_tls_certificate_named_by_a_new_web_config_is_served(serve: StartServer, tmp_path: Path,
                                                              certs: Certs) -> None:
    (tmp_path / "second").mkdir()
    second = make_certs(tmp_path / "second")
    path = write_web_config(tmp_path, tls_config_text(certs))
    server = serve(load_web_config(path), web_config_file=str(path), reload_interval_s=POLL_S)
    auth = {"Authorization": basic("prometheus", "s3cret-scrape")}
    assert get(server.port, context=client_context(certs), headers=auth)[0] == 200
    write_web_config(tmp_path, tls_config_text(second))
    assert wait_for(lambda: _tls_status(server, second, auth) == 200, timeout=5)


def _tls_status(server: AgentHTTPServer, certs: Certs, headers: dict[str, str]) -> int:
    try:
        return get(server.port, context=client_context(certs), headers=headers)[0]
    except (OSError, http.client.HTTPException):
        return 0


def test_switching_tls_off_by_reload_is_refused(serve: StartServer, tmp_path: Path, certs: Certs) -> None:
    path = write_web_config(tmp_path, tls_config_text(certs, users=False))
    server = serve(load_web_config(path), web_config_file=str(path), reload_interval_s=POLL_S)
    write_web_config(tmp_path, users_text(alice=ALICE))  # plain HTTP with auth: TLS off
    assert not server.poll_web_files()
    assert server.scheme == "https"
    assert get(server.port, context=client_context(certs))[0] == 200
