"""Expected GEMM peak per chip model and dtype (the baseline of ``npu_probe_gemm_efficiency_ratio``),
and expected copy bandwidths per chip model (the baseline of the membw, h2d and p2p probes).

Two kinds of figure live here, and only one of them gates a probe:

- ``measured``: what a healthy chip of that model achieves on a dense matmul, e.g. the
  ``ascend-dmi -f`` compute test. Falling below ``min_efficiency`` of it fails the probe.
- ``datasheet``: the vendor's dense peak. Real matmuls reach 60-80 % of it, so it is
  reported (efficiency is still exported) but never fails a probe.

Config entries (``peaks: {MODEL: {DTYPE: FLOP/s}}``) count as measured and win over the
built-in table. A model found in neither reports FLOP/s without efficiency.

Model names are matched after normalisation (upper case, no "ASCEND"/"NVIDIA", no spaces,
dashes or underscores), exactly first, then by the longest table key contained in the
name ("NVIDIA H100 80GB HBM3" -> "H100"), so torch's device names and npu-smi's "Name"
column both work.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = ["BANDWIDTH_KINDS", "BUILTIN_BANDWIDTHS", "BUILTIN_PEAKS", "Bandwidth", "Peak", "lookup_bandwidth",
           "lookup_peak", "normalise_model"]

T = 1e12


@dataclass(frozen=True)
class Peak:
    flops: float
    basis: Literal["measured", "datasheet"]
    source: str

    @property
    def gates(self) -> bool:
        """Whether falling short of this figure may fail a probe."""
        return self.basis == "measured"


_DMI = "ascend-dmi -f"
_TORCH_910B2 = "torch.matmul 4096, github.com/zzc0721/torch-performance-test-data/issues/109"

BUILTIN_PEAKS: dict[str, dict[str, Peak]] = {
    # Atlas A2: bf16 runs on the same cube units at the fp16 rate (the 910B2 torch figures
    # below agree to 0.3 %), so the fp16 figure stands in for bf16 where only it is known.
    "910B3": {
        "fp16": Peak(313.7 * T, "measured", _DMI),
        "bf16": Peak(313.7 * T, "measured", f"{_DMI} (fp16 figure)"),
    },
    "910B2": {
        "fp16": Peak(314.5 * T, "measured", _TORCH_910B2),
        "bf16": Peak(315.4 * T, "measured", _TORCH_910B2),
    },
    # Ascend 910 (910A / 910 Pro): Huawei's launch figure, 256 TFLOPS FP16.
    "910A": {"fp16": Peak(256 * T, "datasheet", "Huawei Ascend 910 launch (Hot Chips 2019)")},
    "910PROB": {"fp16": Peak(256 * T, "datasheet", "Huawei Ascend 910 launch (Hot Chips 2019)")},
    # 310P3 (Atlas 300I Pro / Duo chip): ascend-dmi -f -t fp16 capture in shared/corpus/tools.
    "310P3": {"fp16": Peak(88.475 * T, "measured", f"{_DMI} -t fp16, OrangePi AI Station, CANN 8.5.0")},
    # NVIDIA dense tensor-core peaks (without sparsity), from the product datasheets.
    "A100": {
        "fp16": Peak(312 * T, "datasheet", "NVIDIA A100 datasheet"),
        "bf16": Peak(312 * T, "datasheet", "NVIDIA A100 datasheet"),
        "fp32": Peak(19.5 * T, "datasheet", "NVIDIA A100 datasheet (non-tensor FP32)"),
    },
    "H100": {
        "fp16": Peak(989.4 * T, "datasheet", "NVIDIA H100 SXM datasheet (dense)"),
        "bf16": Peak(989.4 * T, "datasheet", "NVIDIA H100 SXM datasheet (dense)"),
    },
    "H100PCIE": {
        "fp16": Peak(756 * T, "datasheet", "NVIDIA H100 PCIe datasheet (dense)"),
        "bf16": Peak(756 * T, "datasheet", "NVIDIA H100 PCIe datasheet (dense)"),
    },
    "H800": {
        "fp16": Peak(989.4 * T, "datasheet", "NVIDIA H800 SXM (dense)"),
        "bf16": Peak(989.4 * T, "datasheet", "NVIDIA H800 SXM (dense)"),
    },
    "H200": {
        "fp16": Peak(989.4 * T, "datasheet", "NVIDIA H200 datasheet (dense)"),
        "bf16": Peak(989.4 * T, "datasheet", "NVIDIA H200 datasheet (dense)"),
    },
}

# --------------------------------------------------------------------------- bandwidths

G = 1e9
# What each probe measures, in the probe's own counting:
#   membw  device-to-device copy within one chip, bytes read + bytes written per second
#   h2d    host -> device over PCIe (or the A3 HCCS plane), bytes per second, one direction
#   d2h    device -> host, the same
#   p2p    chip -> chip copy (HCCS, NVLink, PCIe P2P), bytes per second, one direction
BANDWIDTH_KINDS = ("membw", "h2d", "d2h", "p2p")


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_second: float
    basis: Literal["measured", "datasheet"]
    source: str

    @property
    def gates(self) -> bool:
        """Whether falling short of this figure may fail a probe."""
        return self.basis == "measured"


# 910B3 figures: ascend-dmi --bw results (-t d2d, h2d/d2h, p2p) quoted in the npuwatch issue for
# `npuwatch check --level medium|long`; GB taken as 10^9 bytes. The d2d figure is compared
# with the membw probe's read + written count, as the issue states it.
_DMI_BW = "ascend-dmi --bw -t {} on 910B3, as quoted in the npuwatch check --level issue"
_H200 = "NVIDIA H200 SXM datasheet"

BUILTIN_BANDWIDTHS: dict[str, dict[str, Bandwidth]] = {
    "910B3": {
        "membw": Bandwidth(1538 * G, "measured", _DMI_BW.format("d2d") + " (HBM)"),
        "h2d": Bandwidth(24.8 * G, "measured", _DMI_BW.format("h2d") + " (PCIe)"),
        "d2h": Bandwidth(24.8 * G, "measured", _DMI_BW.format("d2h") + " (PCIe; the issue gives one "
                                                                          "host<->device figure)"),
        "p2p": Bandwidth(26.2 * G, "measured", _DMI_BW.format("p2p") + " (HCCS)"),
    },
    # Datasheet peaks: reported as efficiency, never a failure. A device copy reaches ~90 %
    # of the HBM figure (about 4.3 TB/s read + written measured on an H200).
    "H200": {
        "membw": Bandwidth(4.8e12, "datasheet", f"{_H200}: HBM3e 4.8 TB/s"),
        "h2d": Bandwidth(64 * G, "datasheet", f"{_H200}: PCIe Gen5 128 GB/s, half per direction"),
        "d2h": Bandwidth(64 * G, "datasheet", f"{_H200}: PCIe Gen5 128 GB/s, half per direction"),
        "p2p": Bandwidth(450 * G, "datasheet", f"{_H200}: NVLink 900 GB/s, half per direction"),
    },
}

_STRIP = re.compile(r"ASCEND|NVIDIA|[\s\-_]")


def normalise_model(name: str) -> str:
    """``"Ascend910B3"``, ``"910B3"`` and ``"ascend 910b3"`` all become ``"910B3"``."""
    return _STRIP.sub("", name.upper())


_Entry = TypeVar("_Entry")


def _find(table: Mapping[str, Mapping[str, _Entry]], model: str) -> Mapping[str, _Entry] | None:
    keys = {normalise_model(key): key for key in table}
    wanted = normalise_model(model)
    if wanted in keys:
        return table[keys[wanted]]
    contained = [norm for norm in keys if norm and norm in wanted]
    if not contained:
        return None
    return table[keys[max(contained, key=len)]]


def lookup_bandwidth(model: str | None, kind: str,
                     overrides: Mapping[str, Mapping[str, float]] | None = None) -> Bandwidth | None:
    """The expected bandwidth of ``kind`` (see BANDWIDTH_KINDS) for ``model``; ``overrides``
    (``{model: {kind: bytes/s}}``, e.g. from ascend-dmi on a healthy node) count as measured and win."""
    if not model:
        return None
    if overrides:
        configured = {
            name: {k: Bandwidth(float(rate), "measured", "config") for k, rate in per_kind.items()}
            for name, per_kind in overrides.items()
        }
        found = _find(configured, model)
        if found is not None and kind in found:
            return found[kind]
    builtin = _find(BUILTIN_BANDWIDTHS, model)
    return None if builtin is None else builtin.get(kind)


def lookup_peak(model: str | None, dtype: str,
                overrides: Mapping[str, Mapping[str, float]] | None = None) -> Peak | None:
    """The expected peak for ``model``/``dtype``; config ``overrides`` first, None if unknown."""
    if not model:
        return None
    if overrides:
        configured = {
            name: {dt: Peak(float(flops), "measured", "config") for dt, flops in per_dtype.items()}
            for name, per_dtype in overrides.items()
        }
        found = _find(configured, model)
        if found is not None and dtype in found:
            return found[dtype]
    found = _find(BUILTIN_PEAKS, model)
    return None if found is None else found.get(dtype)
