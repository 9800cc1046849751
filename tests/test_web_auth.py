"""Basic auth: timing does not tell which user names exist, and bcrypt costs a scrape cannot
afford are refused when the web config is loaded (and by ``npuwatch check-config``)."""

from __future__ import annotations

import itertools
import math
import random
import time
from pathlib import Path

import bcrypt
import pytest

from agent.cli import main
from agent.core.config import ConfigError
from agent.web.auth import Auth, BasicAuth, BcryptVerifier
from agent.web.config import build_web_config, load_web_config
from tests.web_harness import basic, write_web_config

ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
COSTS = {"alice": 4, "bob": 6, "carol": 8}
_PASSWORDS = itertools.count()  # every check a new password: a cached outcome takes no time


def seeded_hash(password: str, cost: int, rng: random.Random) -> str:
    """A bcrypt hash with a salt from ``rng``, so the decoy choice below is the same every run."""
    salt = f"$2b${cost:02d}$" + "".join(rng.choice(ALPHABET) for _ in range(21)) + "e"
    return bcrypt.hashpw(password.encode(), salt.encode()).decode()


def fastest_checks_s(auth: BasicAuth, users: list[str], rounds: int) -> dict[str, float]:
    """Fastest of ``rounds`` checks per user, each with a new wrong password (never cached).

    Rounds go round-robin over the users, so a burst of load on a shared machine hits all of
    them alike; the minimum, not the median, because noise only ever adds time."""
    fastest = dict.fromkeys(users, float("inf"))
    for n in range(rounds):
        for user in users:
            started = time.perf_counter()
            outcome = auth.check(basic(user, f"wrong-{next(_PASSWORDS)}"), f"client-{user}-{n}")
            fastest[user] = min(fastest[user], time.perf_counter() - started)
            assert outcome is Auth.DENIED
    return fastest


def test_unknown_users_answer_like_configured_users_of_some_cost() -> None:
    """For every configured cost some unknown names take as long as a wrong password for that cost's
    user (nearest in log time), and no unknown name is faster or slower than the configured users:
    timing alone cannot separate existing names from made-up ones. (A decoy at one fixed cost, the
    highest, fails the first half: names answering at the cheaper costs would all be real.)"""
    rng = random.Random(20261201)
    users = {name: seeded_hash(f"{name}-pw", cost, rng) for name, cost in COSTS.items()}
    auth = BasicAuth(users, verifier=BcryptVerifier(workers=1, per_client_burst=1000, max_pending=64))
    try:
        fastest_checks_s(auth, ["alice"], 5)  # warm-up: thread start, first calls
        ghosts = [f"ghost{n:02d}" for n in range(18)]
        times = fastest_checks_s(auth, [*COSTS, *ghosts], 9)
        known = {cost: times[name] for name, cost in COSTS.items()}
        assert known[4] < known[6] < known[8]  # 4x apart: far enough to tell apart here
        matched: dict[int, list[str]] = {cost: [] for cost in known}
        for name in ghosts:
            # Within the configured users' range, give or take the noise of a shared machine: not
            # answered without bcrypt, not at a cost nobody has.
            assert known[4] / 3 < times[name] < known[8] * 3, f"{name}: {times[name] * 1e3:.1f} ms, {known}"
            matched[min(known, key=lambda cost: abs(math.log(times[name] / known[cost])))].append(name)
        assert all(matched.values()), f"some configured cost has no look-alike unknown names: {matched}"
    finally:
        auth.close()


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
