"""Basic auth: timing does not tell which user names exist, and bcrypt costs a scrape cannot
afford are refused when the web config is loaded (and by ``npuwatch check-config``)."""

from __future__ import annotations

import base64
import random
import threading
import time
from pathlib import Path

import bcrypt
import pytest

from agent.cli import main
from agent.core.config import ConfigError
from agent.web import auth as auth_module
from agent.web.auth import (
    Auth,
    BasicAuth,
    BcryptVerifier,
    CredentialCache,
    bcrypt_cost,
    parse_basic_authorization,
)
from agent.web.config import build_web_config, load_web_config
from tests.support.web_harness import write_web_config

ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
COSTS = {"alice": 4, "bob": 6, "carol": 8}


def seeded_hash(password: str, cost: int, rng: random.Random) -> str:
    """A bcrypt hash with a salt from ``rng``, so the decoy choice below is the same every run."""
    salt = f"$2b${cost:02d}$" + "".join(rng.choice(ALPHABET) for _ in range(21)) + "e"
    return bcrypt.hashpw(password.encode(), salt.encode()).decode()


def test_decoy_cost_is_stable_for_the_same_users_and_spread_over_their_costs() -> None:
    rng = random.Random(1)
    users = {name: seeded_hash("pw", cost, rng) for name, cost in COSTS.items()}
    first, second = BasicAuth(users), BasicAuth(users)  # e.g. before and after a restart
    names = [f"user{n}".encode() for n in range(300)]
    assert [first.decoy_cost(n) for n in names] == [second.decoy_cost(n) for n in names]
    spread = {cost: sum(first.decoy_cost(n) == cost for n in names) for cost in COSTS.values()}
    assert all(count > 60 for count in spread.values()), spread  # about a third each
    first.close()
    second.close()


@pytest.mark.parametrize("cost", [13, 14, 31])
def test_costs_above_12_are_refused_with_the_reason(cost: int) -> None:
    hashed = f"$2b${cost:02d}$" + "a" * 53
    with pytest.raises(ConfigError) as error:
        build_web_config({"basic_auth_users": {"alice": hashed}})
    message = str(error.value)
    assert f"basic_auth_users.alice: bcrypt cost {cost} is outside 4..12" in message
    assert "rehash with cost 10" in message and hashed not in message


@pytest.mark.parametrize("cost", [4, 10, 12])
def test_costs_up_to_12_are_accepted(cost: int) -> None:
    hashed = f"$2b${cost:02d}$" + "a" * 53
    assert build_web_config({"basic_auth_users": {"alice": hashed}}).basic_auth_users == {"alice": hashed}


def test_check_config_refuses_a_costly_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    web = write_web_config(tmp_path, "basic_auth_users:\n  alice: $2b$14$" + "a" * 53 + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"web:\n  config_file: {web}\n")
    assert main(["check-config", str(config)]) == 2
    assert "basic_auth_users.alice: bcrypt cost 14 is outside 4..12" in capsys.readouterr().err
    web.write_text("basic_auth_users:\n  alice: $2b$12$" + "a" * 53 + "\n")
    assert main(["check-config", str(config)]) == 0
    assert load_web_config(web).basic_auth_users


HASH4 = bcrypt.hashpw(b"pw-a", bcrypt.gensalt(rounds=4)).decode()
HASH5 = bcrypt.hashpw(b"pw-b", bcrypt.gensalt(rounds=5)).decode()


def header(user: str, password: str, scheme: str = "Basic") -> str:
    return f"{scheme} " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize(("raw", "parsed"), [
    (None, None),
    ("", None),
    (header("alice", "s3:cret"), (b"alice", b"s3:cret")),
    ("  " + header("a", "b", "bAsIc") + "  ", (b"a", b"b")),
    (header("", ""), (b"", b"")),
    ("Basic  " + base64.b64encode(b"u:p").decode() + " ", (b"u", b"p")),
    ("Bearer " + base64.b64encode(b"u:p").decode(), None),
    ("Basic " + base64.b64encode(b"no-colon").decode(), None),
    ("Basic not*base64", None),
    ("Basic", None),
    ("Basicx " + base64.b64encode(b"u:p").decode(), None),
    ("Basic dTpw!", None),  # strict base64: a stray character is not dropped
    ("Basic dTpw", (b"u", b"p")),
])
def test_parse_basic_authorization(raw: str | None, parsed: tuple[bytes, bytes] | None) -> None:
    assert parse_basic_authorization(raw) == parsed


def test_bcrypt_cost_of_text_and_bytes() -> None:
    assert bcrypt_cost("$2b$12$abc") == 12
    assert bcrypt_cost(b"$2b$04$abc") == 4


def test_credential_cache_keys_frame_their_parts() -> None:
    cache = CredentialCache()
    assert cache.key(b"ab", b"c", b"d") != cache.key(b"a", b"bc", b"d")
    assert cache.key(b"a", b"b", b"cd") != cache.key(b"a", b"bc", b"d")
    assert cache.key(b"a", b"b", b"c") == cache.key(b"a", b"b", b"c")
    assert CredentialCache().key(b"a", b"b", b"c") != cache.key(b"a", b"b", b"c")  # salted per cache
    assert len(cache.key(b"a", b"b", b"c")) == 32


def test_credential_cache_keeps_grants_and_denials_apart_most_recent_last() -> None:
    cache = CredentialCache(granted_size=2, denied_size=3)
    assert cache.get(b"g1") is None
    cache.put(b"g1", True)
    cache.put(b"g2", True)
    assert cache.get(b"g1") is True  # touched: g2 is now the oldest grant
    cache.put(b"g3", True)
    assert (cache.get(b"g1"), cache.get(b"g2"), cache.get(b"g3")) == (True, None, True)
    for n in range(4):
        cache.put(f"d{n}".encode(), False)
    assert [cache.get(f"d{n}".encode()) for n in range(4)] == [None, False, False, False]
    assert cache.get(b"g1") is True  # denials never push grants out
    cache.put(b"g1", True)
    cache.put(b"g4", True)
    assert (cache.get(b"g1"), cache.get(b"g3"), cache.get(b"g4")) == (True, None, True)


def test_default_workers_one_per_four_cores_between_one_and_two(monkeypatch: pytest.MonkeyPatch) -> None:
    for cores, workers in ((None, 1), (1, 1), (4, 1), (7, 1), (8, 2), (64, 2)):
        monkeypatch.setattr(auth_module.os, "cpu_count", lambda cores=cores: cores)
        assert auth_module._default_workers() == workers


class GatedCheck:
    """checkpw that waits for ``release`` and counts its calls."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.calls += 1
        self.release.wait(5)
        return password == b"good"


def test_verifier_returns_the_outcome_and_frees_the_client() -> None:
    verifier = BcryptVerifier(1, checkpw=lambda password, hashed: password == b"good", wait_s=5)
    try:
        assert verifier.verify(b"k1", b"good", b"h", "c") is True
        assert verifier.verify(b"k2", b"bad", b"h", "c") is False
        assert verifier._in_flight == {}
        assert verifier._clients == set()
    finally:
        verifier.close()


def test_verifier_over_long_passwords_are_false_not_errors() -> None:
    def refuse(password: bytes, hashed: bytes) -> bool:
        raise ValueError("password too long")

    verifier = BcryptVerifier(1, checkpw=refuse)
    try:
        assert verifier.verify(b"k", b"x" * 100, b"h", "c") is False
    finally:
        verifier.close()


def test_verifier_one_check_per_client_and_a_bounded_queue() -> None:
    gate = GatedCheck()
    verifier = BcryptVerifier(1, max_pending=2, wait_s=0.05, checkpw=gate, per_client_burst=10)
    try:
        assert verifier.verify(b"k1", b"good", b"h", "a") is None  # started, not finished in time
        assert verifier.verify(b"k2", b"good", b"h", "a") is None  # client a has one in flight
        assert verifier.verify(b"k3", b"good", b"h", "b") is None  # started: 2 in flight now
        assert verifier.verify(b"k4", b"good", b"h", "c") is None  # queue full
        assert set(verifier._in_flight) == {b"k1", b"k3"}
        assert verifier._clients == {"a", "b"}
        gate.release.set()
        verifier._wait_s = 5
        assert verifier.verify(b"k1", b"good", b"h", "z") is True  # joins the running check
        assert gate.calls == 2
    finally:
        verifier.close()


def test_verifier_per_client_rate() -> None:
    verifier = BcryptVerifier(1, per_client_rate=0.001, per_client_burst=2, checkpw=lambda p, h: True)
    try:
        assert verifier.verify(b"k1", b"p", b"h", "a") is True
        assert verifier.verify(b"k2", b"p", b"h", "a") is True
        assert verifier.verify(b"k3", b"p", b"h", "a") is None
        assert verifier.verify(b"k4", b"p", b"h", "b") is True
    finally:
        verifier.close()


def test_basic_auth_needs_users() -> None:
    with pytest.raises(ValueError, match=r"^BasicAuth needs at least one user$"):
        BasicAuth({})


def test_basic_auth_grants_denies_and_caches() -> None:
    calls: list[tuple[bytes, bytes]] = []

    def checkpw(password: bytes, hashed: bytes) -> bool:
        calls.append((password, hashed))
        return password == hashed[-4:]

    auth = BasicAuth({"alice": HASH4, "bob": HASH5}, checkpw=checkpw)
    try:
        assert auth.users == ("alice", "bob")
        good = HASH4[-4:]
        assert auth.check(header("alice", good), "c1") is Auth.GRANTED
        assert auth.check(header("alice", good), "c1") is Auth.GRANTED
        assert auth.check(header("alice", "nope"), "c2") is Auth.DENIED
        assert auth.check(header("bob", good), "c3") is Auth.DENIED  # alice's password for bob
        assert auth.check(header("bob", HASH5[-4:]), "c4") is Auth.GRANTED
        assert auth.check(None) is Auth.DENIED
        assert auth.check("Basic ???") is Auth.DENIED
        assert len(calls) == 4  # the repeated grant came from the cache
        assert calls[0] == (good.encode(), HASH4.encode())
    finally:
        auth.close()


def test_an_unknown_user_is_denied_even_when_the_decoy_would_match() -> None:
    auth = BasicAuth({"alice": HASH4}, checkpw=lambda password, hashed: True)
    try:
        assert auth.check(header("mallory", "x"), "c") is Auth.DENIED
        assert auth.check(header("alice", "x"), "c2") is Auth.GRANTED
    finally:
        auth.close()


def test_the_decoy_of_an_unknown_user_has_a_configured_cost() -> None:
    seen: list[bytes] = []

    def checkpw(password: bytes, hashed: bytes) -> bool:
        seen.append(hashed)
        return False

    auth = BasicAuth({"alice": HASH4, "bob": HASH5}, checkpw=checkpw)
    try:
        costs = {auth.decoy_cost(f"user{n}".encode()) for n in range(64)}
        assert costs == {4, 5}
        assert auth.decoy_cost(b"user1") == auth.decoy_cost(b"user1")
        auth.check(header("mallory", "x"), "c")
        assert bcrypt_cost(seen[0]) == auth.decoy_cost(b"mallory")
        assert seen[0] not in (HASH4.encode(), HASH5.encode())
        assert len(seen[0]) == 60
    finally:
        auth.close()


def test_busy_when_the_verifier_cannot_start_a_check() -> None:
    verifier = BcryptVerifier(1, max_pending=0, checkpw=lambda p, h: True)
    auth = BasicAuth({"alice": HASH4}, verifier=verifier)
    try:
        assert auth.check(header("alice", "x"), "c") is Auth.BUSY
        auth.close()  # a shared verifier is not the auth's to close
        verifier._max_pending = 1
        assert verifier.verify(b"k", b"p", b"h", "c") is True
    finally:
        verifier.close()


def test_an_owned_verifier_is_closed_with_the_auth() -> None:
    auth = BasicAuth({"alice": HASH4}, checkpw=lambda p, h: True)
    auth.close()
    with pytest.raises(RuntimeError):
        auth._verifier._pool.submit(lambda: None)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_verifier_default_rate_is_one_a_second_with_a_burst_of_four() -> None:
    verifier = BcryptVerifier(1, checkpw=lambda p, h: True)
    clock = FakeClock()
    verifier._rate._clock = clock
    try:
        assert [verifier.verify(f"k{n}".encode(), b"p", b"h", "a") for n in range(5)] == [True] * 4 + [None]
        clock.now += 0.6
        assert verifier.verify(b"k5", b"p", b"h", "a") is None
        clock.now += 0.5
        assert verifier.verify(b"k6", b"p", b"h", "a") is True
    finally:
        verifier.close()


def test_verifier_pool_size_and_thread_names() -> None:
    names: list[str] = []

    def checkpw(password: bytes, hashed: bytes) -> bool:
        names.append(threading.current_thread().name)
        return True

    verifier = BcryptVerifier(3, checkpw=checkpw)
    default = BcryptVerifier(checkpw=checkpw)
    try:
        assert verifier._pool._max_workers == 3
        assert default._pool._max_workers == auth_module._default_workers()
        assert verifier.verify(b"k", b"p", b"h", "a") is True
        assert names[0].startswith("bcrypt")
    finally:
        verifier.close()
        default.close()


def test_close_returns_at_once_and_cancels_queued_checks() -> None:
    gate = GatedCheck()
    verifier = BcryptVerifier(1, wait_s=0.01, checkpw=gate)
    try:
        assert verifier.verify(b"k1", b"good", b"h", "a") is None  # running, blocked on the gate
        assert verifier.verify(b"k2", b"good", b"h", "b") is None  # queued behind it
        queued = verifier._in_flight[b"k2"]
        started = time.monotonic()
        verifier.close()
        assert time.monotonic() - started < 1.0
        assert queued.cancelled()
    finally:
        gate.release.set()


def test_concurrent_checks_of_two_clients_keep_their_own_outcomes() -> None:
    gate = GatedCheck()
    auth = BasicAuth({"alice": HASH4}, verifier=BcryptVerifier(2, checkpw=gate, wait_s=5))
    outcomes: dict[str, Auth] = {}
    first = threading.Thread(target=lambda: outcomes.setdefault("a", auth.check(header("alice", "good"), "a")))
    first.start()
    deadline = time.monotonic() + 5
    while gate.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    threading.Timer(0.3, gate.release.set).start()
    outcomes["b"] = auth.check(header("alice", "bad"), "b")  # another credential, another client
    first.join(5)
    assert outcomes == {"a": Auth.GRANTED, "b": Auth.DENIED}
    assert gate.calls == 2
    auth._verifier.close()


def test_credential_cache_default_sizes() -> None:
    cache = CredentialCache()
    for n in range(65):
        cache.put(f"g{n}".encode(), True)
    for n in range(1025):
        cache.put(f"d{n}".encode(), False)
    assert (cache.get(b"g0"), cache.get(b"g1"), cache.get(b"g64")) == (None, True, True)
    assert (cache.get(b"d0"), cache.get(b"d1"), cache.get(b"d1024")) == (None, False, False)


def test_verifier_default_queue_holds_sixteen_checks() -> None:
    gate = GatedCheck()
    verifier = BcryptVerifier(1, wait_s=0.001, checkpw=gate)
    try:
        for n in range(17):
            assert verifier.verify(f"k{n}".encode(), b"good", b"h", f"client{n}") is None
        assert len(verifier._in_flight) == 16
    finally:
        gate.release.set()
        verifier.close()


def test_the_default_verifier_checks_with_bcrypt() -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    auth = BasicAuth({"alice": hashed})  # no checkpw given: bcrypt's own
    try:
        good = "Basic " + base64.b64encode(b"alice:s3cret").decode()
        bad = "Basic " + base64.b64encode(b"alice:wrong").decode()
        assert auth.check(good, "127.0.0.1") is Auth.GRANTED
        assert auth.check(bad, "127.0.0.2") is Auth.DENIED
    finally:
        auth.close()
