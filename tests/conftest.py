"""The suite's shared fixtures and its tiers.

Every test is marked by the tier directory it sits in (``unit``, ``integration``, ``e2e``,
``conformance``; registered in pyproject.toml), so ``-m unit`` and ``-m "not e2e"`` select by tier as
well as by path. The fixtures here build on tests/support (docs/development.md, "Test layout"):

- ``demo_agent``: an in-process agent on a demo node (fake npu-smi/hccn_tool run as subprocesses),
  its HTTP server started; yields a ``ServedAgent`` (bundle and base URL) and stops both after.
- ``daemon``: ``npuwatch run --demo`` in a process of its own (tests.support.daemon), healthy.
- ``prometheus`` / ``alertmanager``: factories that start a real Prometheus / Alertmanager with the
  harness functions of tests.support.prom_harness and stop every one they started at teardown.
- ``webhook``: a started WebhookReceiver (Alertmanager's notifications), stopped at teardown.

``NPUWATCH_HYPOTHESIS=derandomized`` (set by bench/mutation.py) makes every hypothesis test draw the
same examples each run, from no example database: a mutant is then judged on the inputs its clean run
passed, not on whatever a fresh random draw finds.

In the fast tiers (tests/unit, tests/conformance) a test that starts a subprocess, forks or listens on
a socket fails (``StartsSomething``): such a test belongs in tests/integration.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.support.agent_harness import ServedAgent, demo_bundle, get, serving, wait_for
from tests.support.daemon import BASE_CONFIG, Daemon
from tests.support.prom_harness import (
    AMProcess,
    PromProcess,
    StartAlertmanager,
    StartPrometheus,
    WebhookReceiver,
    start_alertmanager,
    start_alertmanager_with,
    start_prometheus,
)
from tests.support.tiers import FAST_TIERS, StartsSomething, tier_of

settings.register_profile("derandomized", derandomize=True, database=None)
if os.environ.get("NPUWATCH_HYPOTHESIS"):
    settings.load_profile(os.environ["NPUWATCH_HYPOTHESIS"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(Path(str(item.path)))
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(autouse=True)
def _root_logging_as_it_was() -> Iterator[None]:
    """A command run in-process (``setup_logging``) points the root logger at the test's captured stderr; the next
    test must not log into that closed stream."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True, scope="module")
def _fast_tiers_start_nothing(request: pytest.FixtureRequest) -> Iterator[None]:
    """In tests/unit and tests/conformance, starting a subprocess, forking or listening on a socket fails the test.

    Module-scoped and autouse, so it is in place before the module's other module-scoped fixtures too.
    """
    if tier_of(Path(str(request.node.path))) not in FAST_TIERS:
        yield
        return

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise StartsSomething(f"a {'/'.join(FAST_TIERS)} test must not {what}: move it to tests/integration")
        return refused

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", refuse("start a subprocess"))
        patch.setattr(socket.socket, "listen", refuse("listen on a socket"))
        patch.setattr(os, "fork", refuse("fork"))
        yield


@pytest.fixture(scope="session")
def fake_dcmi(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``fake_dcmi(variant)``: the fake libdcmi.so of that variant (tests.support.fake_dcmi), built once a session.

    Skips when there is no C compiler (CI has one: scripts/test installs gcc).
    """
    from tests.support import fake_dcmi as fake

    if fake.compiler() is None:
        pytest.skip("no C compiler (cc/gcc) to build the fake libdcmi.so: apt-get install gcc libc6-dev")
    directory = tmp_path_factory.mktemp("fake-dcmi")
    built: dict[str, Path] = {}

    def get(variant: str = "full") -> Path:
        if variant not in built:
            built[variant] = fake.build(variant, directory)
        return built[variant]

    return get


@pytest.fixture(scope="session")
def promtool() -> str:
    """The promtool binary (Debian package prometheus); the test fails, not skips, without it."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found on PATH: install it (Debian/Ubuntu: apt-get install prometheus)")
    return found


@pytest.fixture
def demo_agent(tmp_path: Path) -> Iterator[ServedAgent]:
    """A demo-backed agent (8 chips, the fast test config) with its HTTP server; no scheduler."""
    bundle = demo_bundle(tmp_path)
    with serving(bundle) as url:
        yield ServedAgent(bundle, url)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    """``npuwatch run --demo`` (BASE_CONFIG) in its own process, answering /healthz."""
    running = Daemon(tmp_path, BASE_CONFIG)
    try:
        assert wait_for(lambda: get(running.url + "/healthz", timeout=1)[0] == 200, timeout=30), running.log_text()
        yield running
    finally:
        running.stop()


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[StartPrometheus]:
    """``prometheus(targets, rule_files=(), **start_prometheus_options)``: a real Prometheus, ready."""
    started: list[PromProcess] = []

    def start(targets: Sequence[str], rule_files: Sequence[Path] = (), **options: Any) -> PromProcess:
        where = tmp_path if not started else tmp_path / f"prometheus-{len(started)}"
        prom = start_prometheus(where, targets, rule_files, **options)
        started.append(prom)
        return prom

    try:
        yield start
    finally:
        for prom in reversed(started):
            prom.stop()


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[StartAlertmanager]:
    """``alertmanager(webhook_url=...)`` (every alert to one webhook) or ``alertmanager(config_path=...)``
    (that configuration file): a real Alertmanager, ready, gossip off."""
    started: list[AMProcess] = []

    def start(*, webhook_url: str | None = None, config_path: Path | None = None, **options: Any) -> AMProcess:
        if (webhook_url is None) == (config_path is None):
            raise TypeError("alertmanager(): give webhook_url or config_path, not both")
        where = tmp_path / f"alertmanager-{len(started)}"
        if config_path is not None:
            am = start_alertmanager_with(config_path, where, **options)
        else:
            assert webhook_url is not None
            am = start_alertmanager(where, webhook_url, **options)
        started.append(am)
        return am

    try:
        yield start
    finally:
        for am in reversed(started):
            am.stop()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()
