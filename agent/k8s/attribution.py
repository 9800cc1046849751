"""Pod attribution: ``npu_pod_info{npu, chip, namespace, pod, container} 1`` for every chip a pod holds.

Runs as the agent's internal job ``pod_resources`` on its own schedule (``kubernetes.interval``),
never on the scrape path: a scrape serves the last rendered result while a slow kubelet answer is
awaited. Each run asks the kubelet's pod-resources API which containers hold devices of the
configured resources (``kubernetes.resources``), maps each device ID to a chip of the agent's
inventory (``agent.k8s.devices``) and exports one series per (chip, pod, container). A chip no pod
holds has no series. Join it onto any per-chip metric::

    npu_temperature_celsius * on (node, npu, chip) group_left (namespace, pod) npu_pod_info

No socket (not a Kubernetes node, kubelet restarting) is no data: ``npuwatch_collector_up
{collector="pod_resources"} 0`` with reason ``no_data``, no error counted. A failed or late call
is an error; the previous answer is served until it is 3 intervals old. Device IDs of a matching
resource that name no chip of this node (another ID format, a chip npu-smi does not list) are
logged once each and counted in ``npuwatch_pod_attribution_unmapped_devices``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent.core.jobs import InternalJob
from agent.k8s.devices import ChipIndex, resource_matches
from agent.k8s.podresources import Holding, PodResourcesClient, PodResourcesError, SocketMissing, grpc_available
from collectors.base import ChipRef, NoData, Sample

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["JOB_NAME", "PodAttribution", "attribution_job", "wanted"]

log = logging.getLogger(__name__)

JOB_NAME = "pod_resources"
METRIC = "npu_pod_info"
UNMAPPED_METRIC = "npuwatch_pod_attribution_unmapped_devices"
MAX_WARNED_IDS = 256  # distinct unmappable device IDs warned about; later ones only at debug level


def wanted(setting: Any, environ: Mapping[str, str] | None = None) -> bool:
    """``kubernetes.pod_attribution``: true, false, or ``auto`` (on inside a Kubernetes pod)."""
    if setting == "auto":
        env = os.environ if environ is None else environ
        return bool(env.get("KUBERNETES_SERVICE_HOST"))
    return bool(setting)


class PodAttribution:
    """The ``pod_resources`` job: ``List`` (who holds what) and ``GetAllocatableResources`` (every device,
    to find IDs that name no chip) per run, mapped onto the chips the agent knows."""

    def __init__(
        self,
        client: PodResourcesClient,
        chips: Callable[[], Sequence[ChipRef]],
        resources: Sequence[str],
    ) -> None:
        self.client = client
        self._chips = chips
        self.resources = tuple(resources)
        self._warned: set[str] = set()
        self._warned_lock = threading.Lock()
        self._basis_logged = ""
        self._allocatable_unsupported = False

    def collect(self) -> list[Sample]:
        try:
            holdings = self.client.list()
        except SocketMissing as exc:
            raise NoData(str(exc)) from None
        chips = list(self._chips())
        if not chips:
            raise NoData("no chip list yet: npu-smi has not answered since the agent started")
        index = ChipIndex.of(chips)
        self._log_basis(index)
        held: set[tuple[ChipRef, str, str, str]] = set()
        unmapped: set[str] = set()
        for holding in holdings:
            if not resource_matches(holding.resource, self.resources):
                continue
            for device_id in holding.device_ids:
                chip = index.chip(device_id)
                if chip is None:
                    unmapped.add(device_id)
                    self._warn_unmapped(holding, device_id, index)
                    continue
                held.add((chip, holding.namespace, holding.pod, holding.container))
        unmapped |= self._unmapped_allocatable(index)
        samples = [
            Sample(METRIC, (*chip.labels(), ("namespace", namespace), ("pod", pod), ("container", container)), 1.0)
            for chip, namespace, pod, container in sorted(held)
        ]
        samples.append(Sample(UNMAPPED_METRIC, (), float(len(unmapped))))
        return samples

    def _unmapped_allocatable(self, index: ChipIndex) -> set[str]:
        """Device IDs of the node's matching resources that name no chip, allocated to a pod or not.

        ``GetAllocatableResources`` is GA since Kubernetes 1.28; an older kubelet answers UNIMPLEMENTED
        and only the devices pods hold are checked.
        """
        if self._allocatable_unsupported:
            return set()
        try:
            known = self.client.allocatable()
        except PodResourcesError as exc:
            if exc.code == "UNIMPLEMENTED":
                self._allocatable_unsupported = True
                log.info("pod attribution: this kubelet has no GetAllocatableResources; only held devices are "
                         "checked against the chip list")
                return set()
            raise
        except SocketMissing as exc:
            raise NoData(str(exc)) from None
        unmapped: set[str] = set()
        for resource, device_ids in known.items():
            if resource_matches(resource, self.resources):
                for device_id in device_ids:
                    if index.chip(device_id) is None:
                        unmapped.add(device_id)
                        self._warn_unmapped(Holding("", "", "", resource, device_ids), device_id, index)
        return unmapped

    def _log_basis(self, index: ChipIndex) -> None:
        if index.basis != self._basis_logged:
            self._basis_logged = index.basis
            if index.basis == "logic_id":
                log.info("pod attribution: npu-smi info -m prints no physical chip ids here; device IDs are "
                         "matched to logic ids")

    def _warn_unmapped(self, holding: Holding, device_id: str, index: ChipIndex) -> None:
        with self._warned_lock:
            first = device_id not in self._warned and len(self._warned) < MAX_WARNED_IDS
            if first:
                self._warned.add(device_id)
        level = logging.WARNING if first else logging.DEBUG
        held_by = f" (held by pod {holding.namespace}/{holding.pod})" if holding.pod else ""
        log.log(level, "pod attribution: device %r of %s%s names no chip of this node (chips by %s: %s)",
                device_id[:64], holding.resource, held_by, index.basis,
                ", ".join(str(key) for key in sorted(index.by_id)) or "none")


def attribution_job(config: Config, chips: Callable[[], Sequence[ChipRef]]) -> InternalJob | None:
    """The ``pod_resources`` internal job for ``config.kubernetes``; None when attribution is off."""
    settings = config.kubernetes
    if not wanted(settings.pod_attribution):
        return None
    if not grpc_available():
        log.warning("pod attribution is on but grpcio/protobuf are not installed (pip install 'npuwatch[k8s]'); "
                    "npu_pod_info stays empty")

        def missing() -> list[Sample]:
            raise NoData("grpcio and protobuf are not installed (the k8s extra)")

        return InternalJob(JOB_NAME, settings.interval, missing)
    client = PodResourcesClient(settings.pod_resources_socket, settings.timeout)
    return InternalJob(JOB_NAME, settings.interval, PodAttribution(client, chips, settings.resources).collect)
