"""Paths an audit found no test ever executed: inline-PEM TLS, probes.peaks validation, `once --probes`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent.core.config import ConfigError, build_config
from agent.web.config import build_web_config
from tests.support.paths import REPO
from tests.support.web_harness import Certs, StartServer, certs, client_context, get, serve  # noqa: F401 - fixtures

# --- TLS from PEM text in the web config (no files) ---------------------------------------------------


def test_inline_pem_certificate_and_key_serve_tls(certs: Certs, serve: StartServer) -> None:  # noqa: F811
    config = build_web_config({"tls_server_config": {"cert": certs.server_cert.read_text(),
                                                     "key": certs.server_key.read_text()}})
    server = serve(config)
    status, body = get(server.port, context=client_context(certs))[:2]
    assert status == 200 and b"npu_chips" in body


def test_inline_pem_that_is_not_a_key_is_refused(certs: Certs) -> None:  # noqa: F811
    with pytest.raises(ConfigError, match="cannot load certificate and key"):
        build_web_config({"tls_server_config": {"cert": certs.server_cert.read_text(), "key": "not a key"}})


# --- probes.peaks ------------------------------------------------------------------------------------------


def test_peaks_add_and_override_models() -> None:
    config = build_config({"probes": {"peaks": {"910B3": {"fp16": 300e12}, "custom": {"bf16": 1e15, "fp32": 5e13}}}})
    assert config.probes.peaks == {"910B3": {"fp16": 300e12}, "custom": {"bf16": 1e15, "fp32": 5e13}}


@pytest.mark.parametrize("peaks", [
    {"910B3": {"fp16": -1.0}},
    {"910B3": {"fp16": 0}},
    {"910B3": {"fp16": "fast"}},
    {"910B3": {"fp16": True}},
    {"910B3": 313.7e12},
    ["910B3"],
])
def test_bad_peaks_are_refused(peaks: object) -> None:
    with pytest.raises(ConfigError, match=r"probes\.peaks"):
        build_config({"probes": {"peaks": peaks}})


# --- once --probes ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_once_with_probes_runs_them_on_the_demo(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"probes": {"gemm": {"size": 128}, "allreduce": {"size": "64KiB"}}}))
    result = subprocess.run([sys.executable, "-m", "agent", "once", "--demo", "--demo-dir", str(tmp_path / "demo"),
                             "--demo-chips", "2", "--config", str(config), "--probes"],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert 'npuwatch_probe_runs_total{outcome="pass",probe="gemm"} 1.0' in result.stdout, result.stderr[-3000:]
    assert 'npuwatch_probe_runs_total{outcome="pass",probe="allreduce"} 1.0' in result.stdout, result.stderr[-3000:]
    assert "npu_probe_gemm_flops{" in result.stdout
    assert "npu_probe_allreduce_bus_bandwidth_bytes_per_second{" in result.stdout
