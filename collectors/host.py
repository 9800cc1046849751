"""Host metrics from psutil: CPU, load, memory, disk and network of the NPU node.

Manual equivalent: ``uptime``, ``free -b``, ``df -B1 /``, ``cat /proc/net/dev``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import psutil

from collectors.base import Sample

__all__ = ["HostCollector"]

_SKIP_INTERFACES = ("lo",)


class HostCollector:
    def __init__(self, mountpoints: Sequence[str] = ("/",)) -> None:
        self._mountpoints = tuple(mountpoints)
        psutil.cpu_percent(interval=None)  # prime: the next call measures since now

    def collect(self) -> list[Sample]:
        samples = [
            Sample("npuwatch_host_cpu_utilization_ratio", (), psutil.cpu_percent(interval=None) / 100.0),
            Sample("npuwatch_host_load1", (), os.getloadavg()[0]),
        ]
        memory = psutil.virtual_memory()
        samples.append(Sample("npuwatch_host_memory_used_bytes", (), float(memory.total - memory.available)))
        samples.append(Sample("npuwatch_host_memory_total_bytes", (), float(memory.total)))
        for mountpoint in self._mountpoints:
            try:
                usage = psutil.disk_usage(mountpoint)
            except OSError:
                continue
            labels = (("mountpoint", mountpoint),)
            samples.append(Sample("npuwatch_host_disk_used_bytes", labels, float(usage.used)))
            samples.append(Sample("npuwatch_host_disk_total_bytes", labels, float(usage.total)))
        for device, counters in sorted(psutil.net_io_counters(pernic=True).items()):
            if device in _SKIP_INTERFACES:
                continue
            labels = (("device", device),)
            samples.append(Sample("npuwatch_host_network_receive_bytes_total", labels, float(counters.bytes_recv)))
            samples.append(Sample("npuwatch_host_network_transmit_bytes_total", labels, float(counters.bytes_sent)))
        return samples
