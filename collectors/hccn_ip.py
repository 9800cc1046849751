"""RoCE port address, for ``npuwatch diagnose``: ``hccn_tool -i <devid> -ip -g`` and ``/etc/hccn.conf``.

``-ip -g`` prints (no space after the colon)::

    ipaddr:29.1.112.213
    netmask:255.255.0.0

``/etc/hccn.conf`` (written by ``hccn_tool -i N -ip -s ...``) holds one
``key_<devid>=value`` line per setting::

    address_0=29.1.112.213
    netmask_0=255.255.0.0
    netdetect_0=29.1.0.1

The ``<devid>`` suffix is the id ``hccn_tool -i`` takes (``hccn_link.device_id``).
No metric comes from here, so there is no ``Source``; diagnose runs ``argv(chip)``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from collectors.base import ParseError
from collectors.hccn_link import clean_lines, hccn_argv, raise_unparsable

__all__ = ["HccnConfEntry", "IpRecord", "argv", "mismatches", "parse", "parse_hccn_conf"]

argv = hccn_argv("ip")

_IP_LINE_RE = re.compile(r"^(?P<key>ipaddr|netmask)\s*:\s*(?P<value>\S*)$", re.IGNORECASE)
_CONF_KEY_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z_]*?)_(?P<dev>\d+)$")


@dataclass(frozen=True)
class IpRecord:
    address: str
    netmask: str | None


@dataclass(frozen=True)
class HccnConfEntry:
    device: int
    address: str | None = None
    netmask: str | None = None
    gateway: str | None = None
    netdetect: str | None = None
    other: dict[str, str] = field(default_factory=dict)  # e.g. tls_enable, send_arp_status


def _checked_ip(value: str, line_no: int, line: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ParseError("not an IP address", line_no, line) from None
    return value


def parse(text: str) -> IpRecord:
    values: dict[str, str] = {}
    for line_no, line in clean_lines(text):
        match = _IP_LINE_RE.match(line)
        if match is not None:
            values[match.group("key").lower()] = _checked_ip(match.group("value"), line_no, line)
    if "ipaddr" not in values:
        raise_unparsable(text, "an 'ipaddr' line")
    return IpRecord(address=values["ipaddr"], netmask=values.get("netmask"))


def parse_hccn_conf(text: str) -> dict[int, HccnConfEntry]:
    """``/etc/hccn.conf`` as {device id: entry}; comments (``#``) and blank lines are skipped.

    Keys without a ``_<devid>`` suffix are ignored; a line without ``=`` is a ``ParseError``.
    """
    per_device: dict[int, dict[str, str]] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ParseError("hccn.conf line without '='", line_no, raw)
        match = _CONF_KEY_RE.match(key.strip())
        if match is None:
            continue
        per_device.setdefault(int(match.group("dev")), {})[match.group("name").lower()] = value.strip()
    entries: dict[int, HccnConfEntry] = {}
    for device, settings in sorted(per_device.items()):
        known = {name: settings.pop(name, None) for name in ("address", "netmask", "gateway", "netdetect")}
        entries[device] = HccnConfEntry(device=device, other=settings, **known)
    return entries


def mismatches(actual: IpRecord, expected: HccnConfEntry) -> list[str]:
    """Human-readable differences between the port's live address and hccn.conf ([] when they agree)."""
    problems: list[str] = []
    if expected.address is not None and expected.address != actual.address:
        problems.append(f"device {expected.device}: ipaddr {actual.address} but hccn.conf address "
                        f"{expected.address}")
    if expected.netmask is not None and actual.netmask is not None and expected.netmask != actual.netmask:
        problems.append(f"device {expected.device}: netmask {actual.netmask} but hccn.conf netmask "
                        f"{expected.netmask}")
    return problems
