"""Fake ``ascend-dmi``: ``-f`` (compute test), ``--bw`` (bandwidth test) and ``--dg`` (fault diagnosis), with ``-q``.

``-f`` copies the shape of a real capture (dashed box, ``Device  Execute Times  Duration(ms)
TFLOPS@FP16  Power(W)``, thousands separators, float32 noise in power). ``--bw`` output is our own
plausible layout in the same style (no real capture was found): one row per device and path.
``--dg`` (also ``-dg``) follows the MindCluster 7.3 ToolBox guide's layout (``Summary:``, then
``Hardware:``/``Software:`` items with their status on the next line and ``*** Device N: ...`` details);
its verdicts come from the chip faults that are on (``hbm_dbe`` fails ``hbm`` and ``hbmStress``,
``link_down``/``optics_no_light``/``net_health_fail`` fail ``network``, ``health`` warns or fails ``device``,
``hot`` fails ``tdp``, ``hccs_error`` fails ``bandwidth``, ``vanish`` fails ``device``); ``-i a,b`` picks items.
Without ``-q`` the tool asks ``(Y/N)`` on stdin, as the real one does.
"""

from __future__ import annotations

import struct
import sys
import time

from agent.demo.render_common import ToolOutput, run_fake
from agent.demo.state import DemoState

__all__ = ["main", "render"]

_DASH = "-" * 89 + "\n"
_PROMPT = (
    "This test will affect the business on this server. To ensure the correctness and accuracy of the "
    "test, perform the operation separately.Do you want to continue?(Y/N)"
)
# dtype -> (column label, peak per chip for 910B3 in T(FL)OPS)
_PEAKS = {
    "fp16": ("TFLOPS@FP16", 313.7),
    "bf16": ("TFLOPS@BF16", 313.7),
    "hf32": ("TFLOPS@HF32", 156.8),
    "fp32": ("TFLOPS@FP32", 78.4),
    "int8": ("TOPS@INT8", 627.4),
}
_EXECUTE_TIMES = 600_000_000
_WORK_MS_TFLOPS = 1_258_291  # duration(ms) x TFLOPS of the captured run: fixed work per test
# path -> GB/s for a healthy 910B3 (PCIe 5.0 x16 to host, HBM on die, HCCS to a peer)
_DATA_SIZE_BYTES = 536_870_912  # 512 MiB per transfer
# d2d: the device copy of a healthy 910B3 as ascend-dmi counts it (read + written), 1538 GB/s
_BANDWIDTH = {"h2d": 26.5, "d2h": 27.8, "d2d": 1538.0, "p2p": 26.6}
_HARDWARE_ITEMS = ("driver", "device", "network", "signalQuality", "hbm", "bandwidth", "aiflops", "hbmStress",
                   "bandwidthStress", "aicore", "edp", "tdp", "aicpu")
_SOFTWARE_ITEMS = ("cann",)
_HEALTH_ITEMS = frozenset({"driver", "device"})  # these say HEALTH, the others PASS


def _float32(value: float) -> str:
    """How the tool prints a float32 watt reading (``85.1999969``)."""
    text = f"{struct.unpack('f', struct.pack('f', value))[0]:.9g}"
    return text if "." in text else f"{value:.1f}"


def _option(argv: list[str], *names: str) -> str | None:
    for name in names:
        if name in argv and argv.index(name) + 1 < len(argv):
            return argv[argv.index(name) + 1]
    return None


def _devices(state: DemoState, argv: list[str]) -> list[int] | None:
    wanted = _option(argv, "-d", "--device")
    if wanted is None:
        return state.visible_chips()
    if not wanted.isdigit() or int(wanted) not in state.visible_chips():
        return None
    return [int(wanted)]


def _jitter(state: DemoState, device: int, now: float) -> float:
    """A deterministic +-0.3 % wobble so repeated runs differ slightly."""
    return 1.0 + 0.003 * (((state.seed * 31 + device * 17 + int(now)) % 21) - 10) / 10


def _compute(state: DemoState, now: float, argv: list[str], devices: list[int]) -> str:
    dtype = (_option(argv, "-t", "--type") or "fp16").lower()
    label, peak = _PEAKS.get(dtype, _PEAKS["fp16"])
    # the captured header pads the flops label with 10 spaces, wider than the 19-wide value column
    header = f"    {'Device':<14}{'Execute Times':<21}{'Duration(ms)':<20}{label + ' ' * 10}Power(W)\n"
    out = [_DASH, header, _DASH]
    for device in devices:
        flops = peak * _jitter(state, device, now)
        duration = round(_WORK_MS_TFLOPS / flops)
        power = 305.33 + 0.07 * ((device * 7 + int(now)) % 50)
        out.append(f"    {device:<14}{_EXECUTE_TIMES:<21,}{duration:<20}{flops:<19.3f}{_float32(power)}\n")
    out.append(_DASH)
    return "".join(out)


def _bandwidth(state: DemoState, now: float, argv: list[str], devices: list[int]) -> str:
    wanted = (_option(argv, "-t", "--type") or "").lower()
    paths = [wanted] if wanted in _BANDWIDTH else list(_BANDWIDTH)
    out = [_DASH, f"    {'Device':<14}{'Transfer Type':<21}{'Data Size(Bytes)':<21}Bandwidth(GB/s)\n", _DASH]
    for device in devices:
        for path in paths:
            value = _BANDWIDTH[path] * _jitter(state, device, now)
            out.append(f"    {device:<14}{path:<21}{_DATA_SIZE_BYTES:<21}{value:.2f}\n")
    out.append(_DASH)
    return "".join(out)


def _chip_problem(state: DemoState, chip: int, item: str) -> tuple[str, str] | None:
    """(status word, detail) of one chip for one ``--dg`` item, from its faults; None when it passes."""
    if item == "device" and state.chip_fault(chip, "vanish") is not None:
        return "FAIL", "the device is not found"
    health = state.chip_fault(chip, "health")
    if item == "device" and health is not None:
        level = str(health.get("state", "Alarm"))
        word = {"Warning": "GENERAL_WARN", "Critical": "EMERGENCY_WARN"}.get(level, "IMPORTANT_WARN")
        codes = health.get("codes", ["8C084E00"])
        return word, f"health {level}, error codes {' '.join(str(code) for code in codes)}"
    if item in ("hbm", "hbmStress") and state.chip_fault(chip, "hbm_dbe") is not None:
        return "FAIL", "uncorrectable HBM ECC errors found"
    if item == "network" and any(state.chip_fault(chip, name) is not None
                                 for name in ("link_down", "optics_no_light", "net_health_fail")):
        return "FAIL", "the RoCE network port check failed"
    if item == "signalQuality" and state.chip_fault(chip, "optics_no_light") is not None:
        return "FAIL", "no optical signal"
    hot = state.chip_fault(chip, "hot")
    if item == "tdp" and hot is not None:
        return "FAIL", f"temperature {float(hot.get('celsius', 97.0)):g} C exceeds the limit under load"
    if item == "bandwidth" and state.chip_fault(chip, "hccs_error") is not None:
        return "FAIL", "HCCS bandwidth below the threshold"
    return None


def _item_status(state: DemoState, item: str) -> tuple[str, list[str]]:
    """(status word, detail lines) of one ``--dg`` item: its worst chip, and a line per chip with a problem."""
    found = [(chip, problem) for chip in range(state.chips)
             if (problem := _chip_problem(state, chip, item)) is not None]
    if not found:
        return ("HEALTH" if item in _HEALTH_ITEMS else "PASS"), []
    words = [word for _, (word, _) in found]
    word = "FAIL" if "FAIL" in words else words[0]
    return word, [f"*** Device {chip}: {detail}." for chip, (_, detail) in found]


def _diagnose(state: DemoState, now: float, argv: list[str]) -> str:
    wanted = _option(argv, "-i", "--item")
    chosen = [item.strip() for item in wanted.split(",")] if wanted else None
    out = ["Summary:\n", "    Arch: aarch64\n", "    Mode: *****\n",
           f"    Time: {time.strftime('%Y%m%d-%H:%M:%S', time.localtime(now))}\n", " \n"]
    for section, items in (("Hardware", _HARDWARE_ITEMS), ("Software", _SOFTWARE_ITEMS)):
        shown = [item for item in items if chosen is None or item in chosen]
        if not shown:
            continue
        out.append(f"{section}:\n")
        for item in shown:
            word, details = _item_status(state, item)
            out += [f"    {item}:\n", f"        {word}\n", *(f"        {line}\n" for line in details)]
    return "".join(out)


def render(state: DemoState, now: float, argv: list[str]) -> ToolOutput:
    """The output of ``ascend-dmi <argv>``; reads the (Y/N) answer from stdin without ``-q``."""
    compute = "-f" in argv or "--flops" in argv
    bandwidth = "--bw" in argv or "-bw" in argv
    diagnose = "--dg" in argv or "-dg" in argv
    if compute + bandwidth + diagnose != 1:
        return ToolOutput("Usage: ascend-dmi [-f|--bw|--dg] [-t type] [-d device] [-i item,...] [-q]\n", exit_code=1)
    devices = _devices(state, argv)
    if devices is None:
        return ToolOutput("[ERROR] The device id is invalid.\n", exit_code=1)
    prompt = ""
    if "-q" not in argv and "--quiet" not in argv:
        answer = sys.stdin.readline().strip()
        prompt = _PROMPT + answer + "\n"
        if answer.upper() != "Y":
            return ToolOutput(prompt, exit_code=1)
    if diagnose:
        return ToolOutput(prompt + _diagnose(state, now, argv))
    body = _compute(state, now, argv, devices) if compute else _bandwidth(state, now, argv, devices)
    return ToolOutput(prompt + body)


def main(argv: list[str] | None = None) -> int:
    return run_fake("ascend_dmi", sys.argv[1:] if argv is None else argv, render)


if __name__ == "__main__":
    sys.exit(main())
