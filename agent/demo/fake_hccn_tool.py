"""Fake ``hccn_tool`` (RoCE NIC of each NPU): ``hccn_tool -i N -<cmd> -g``.

Commands: ``-link``, ``-link_stat``, ``-net_health``, ``-optical``, ``-stat``, ``-speed``, ``-ip``,
``-fec``. Shapes follow real captures (``link status: UP``, ``[devid N]`` prefixed link_stat with
ctime stamps newest first, ``key : value`` optical lines with units, ``name:value`` statistics).
``Speed: 200000 Mb/s`` / ``Speed: Unknown!`` follow the examples quoted in Huawei's npu-exporter.
"""

from __future__ import annotations

import sys
import time

from agent.demo.render_common import ToolOutput, run_fake
from agent.demo.render_model import device_ip, flap_state, optical_reading, optics_dark, roce_counters
from agent.demo.state import DemoState

__all__ = ["main", "render"]

_USAGE = "Usage: hccn_tool -i <device_id> -<command> -g\n"
_COMMANDS = ("link", "link_stat", "net_health", "optical", "stat", "speed", "ip", "fec")


def _ctime(ts: float) -> str:
    return time.asctime(time.localtime(ts))


def _link(state: DemoState, dev: int, now: float) -> str:
    return f"link status: {'UP' if flap_state(state, dev, now).up else 'DOWN'}\n"


def _link_stat(state: DemoState, dev: int, now: float) -> str:
    flap = flap_state(state, dev, now)
    prefix = f"[devid {dev}]"
    out = [
        f"{prefix}{'current time':<20}: {_ctime(now)}\n",
        f"{prefix}{'link up count':<20}: {flap.up_count}\n",
        f"{prefix}{'link change records':<20}:\n",
    ]
    out += [f"{prefix}    {_ctime(ts)}    {event}\n" for ts, event in flap.records if ts <= now]
    return "".join(out)


def _net_health(state: DemoState, dev: int, now: float) -> str:
    fault = state.chip_fault(dev, "net_health_fail")
    if fault is not None:
        status = str(fault.get("status", "Fault"))
    elif state.chip_fault(dev, "link_down") or optics_dark(state, dev, now):
        status = "Fault"  # the health probe cannot reach its peer over a dead link
    else:
        status = "Success"
    return f"net health status: {status}\n"


def _optical(state: DemoState, dev: int, now: float) -> str:
    values = optical_reading(state, dev, now)
    dark = optics_dark(state, dev, now)
    rows: list[tuple[str, str]] = [
        ("present", "present"),
        ("temperature", f"{int(values['temperature'])} C"),
        ("high power enable reg", "enabled"),
        ("vendor name", "DEMO-OPTICS"),
        ("vendor part number", "QSFP56-200G-SR4"),
        ("vendor serial number", f"DM{state.seed % 100:02d}{dev:04d}"),
        ("vendor org unique id", "0xac 0x4a 0x0"),
        ("xsfp identifier", "QSFP+ or later"),
        ("xsfp wave length", "850 nm"),
        ("manufact date code", "2024.3.12"),
        ("Vcc", f"{values['vcc']:.2f} mV"),
    ]
    for lane in range(4):
        rows.append((f"Tx Power{lane}", f"{values[f'tx{lane}']:.4f} mW"))
        rows.append((f"Rx Power{lane}", f"{values[f'rx{lane}']:.4f} mW"))
    rows += [
        ("Vcc High Thres", "3465.00 mV"),
        ("Vcc Low Thres", "3135.00 mV"),
        ("Temp High Thres", "70 C"),
        ("Temp Low Thres", "0 C"),
        ("TxPower High Thres", "3.5481 mW"),
        ("TxPower Low Thres", "0.2818 mW"),
        ("RxPower High Thres", "3.5481 mW"),
        ("RxPower Low Thres", "0.1445 mW"),
    ]
    rows += [(f"Tx Bias{lane}", f"{values[f'bias{lane}']:.4f} mA") for lane in range(4)]
    rows += [
        ("Tx Los Flag", "0x0"),
        ("Rx Los Flag", "0xf" if dark else "0x0"),
        ("Tx LoL Flag", "0x0"),
        ("Rx LoL Flag", "0xf" if dark else "0x0"),
    ]
    rows += [(f"Host SNR Lane{lane}", "not supported") for lane in range(4)]
    rows += [
        (f"Media SNR Lane{lane}", "0.0000 dB" if dark else f"{22.5 + 0.3 * lane:.4f} dB") for lane in range(4)
    ]
    return "optical info:\n" + "".join(f"{key:<21}: {value}\n" for key, value in rows)


def _stat(state: DemoState, dev: int, now: float) -> str:
    counters = roce_counters(state, dev, now)
    return "packet statistics:\n" + "".join(f"{name}:{value}\n" for name, value in counters.items())


def _speed(state: DemoState, dev: int, now: float) -> str:
    return "Speed: 200000 Mb/s\n" if flap_state(state, dev, now).up else "Speed: Unknown!\n"


def _ip(state: DemoState, dev: int, now: float) -> str:
    return f"ipaddr:{device_ip(state, dev)}\nnetmask:255.255.0.0\n"


def _fec(state: DemoState, dev: int, now: float) -> str:
    return "fec mode: no FEC mode\n"


_RENDERERS = {
    "link": _link,
    "link_stat": _link_stat,
    "net_health": _net_health,
    "optical": _optical,
    "stat": _stat,
    "speed": _speed,
    "ip": _ip,
    "fec": _fec,
}


def render(state: DemoState, now: float, argv: list[str]) -> ToolOutput:
    """The output of ``hccn_tool <argv>`` against ``state`` at ``now``."""
    commands = [arg[1:] for arg in argv if arg.startswith("-") and arg[1:] in _COMMANDS]
    if "-i" not in argv or argv.index("-i") + 1 >= len(argv) or len(commands) != 1 or "-g" not in argv:
        return ToolOutput(_USAGE, exit_code=1)
    dev_text = argv[argv.index("-i") + 1]
    if not dev_text.isdigit() or int(dev_text) not in state.visible_chips():
        return ToolOutput(f"Invalid device id [{dev_text}], device does not exist.\n", exit_code=1)
    return ToolOutput(_RENDERERS[commands[0]](state, int(dev_text), now))


def main(argv: list[str] | None = None) -> int:
    return run_fake("hccn_tool", sys.argv[1:] if argv is None else argv, render)


if __name__ == "__main__":
    sys.exit(main())
