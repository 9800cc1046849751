"""A client of the kubelet's pod-resources API (gRPC v1 over a Unix socket): who holds which device.

``PodResourcesClient.list()`` calls ``List`` and returns one ``Holding`` per (pod, container,
resource) that holds devices; ``allocatable()`` calls ``GetAllocatableResources``. Every call has
a deadline. A socket that is not there raises ``SocketMissing`` (not Kubernetes, or the kubelet is
restarting: no data, not an error); a call that fails or runs past its deadline raises
``PodResourcesError``. The channel is dropped after a failure and made again on the next call,
so a kubelet that comes back on a new socket is found.

By hand: ``grpcurl -plaintext -unix /var/lib/kubelet/pod-resources/kubelet.sock v1.PodResourcesLister/List``.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Holding",
    "PodResourcesClient",
    "PodResourcesError",
    "SocketMissing",
    "grpc_available",
]

MAX_MESSAGE_BYTES = 16 << 20  # a List answer on a node with thousands of pods stays far below this


class SocketMissing(Exception):
    """No pod-resources socket at the path: not a Kubernetes node, or the kubelet is restarting."""


class PodResourcesError(Exception):
    """The kubelet did not answer a call in time, or answered with an error status (``code``, e.g. UNIMPLEMENTED)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Holding:
    """Devices of one resource held by one container of one pod."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_ids: tuple[str, ...]


def grpc_available() -> bool:
    """Whether grpcio and protobuf are installed (the ``k8s`` extra)."""
    try:
        import grpc  # noqa: F401

        from agent.k8s import podresources_v1_pb2_grpc  # noqa: F401
    except ImportError:
        return False
    return True


class PodResourcesClient:
    def __init__(self, socket_path: str, timeout_s: float = 5.0) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._channel: Any = None
        self._stub: Any = None

    def list(self) -> list[Holding]:
        """``List``: every device a container holds, one ``Holding`` per (pod, container, resource)."""
        from agent.k8s import podresources_v1_pb2 as pb

        response = self._call("List", pb.ListPodResourcesRequest())
        holdings: list[Holding] = []
        for pod in response.pod_resources:
            for container in pod.containers:
                for devices in container.devices:
                    if devices.device_ids:
                        holdings.append(Holding(pod.namespace, pod.name, container.name, devices.resource_name,
                                                tuple(devices.device_ids)))
        return holdings

    def allocatable(self) -> dict[str, tuple[str, ...]]:
        """``GetAllocatableResources``: ``{resource: device IDs}`` of every device the kubelet knows."""
        from agent.k8s import podresources_v1_pb2 as pb

        response = self._call("GetAllocatableResources", pb.AllocatableResourcesRequest())
        known: dict[str, list[str]] = {}
        for devices in response.devices:
            known.setdefault(devices.resource_name, []).extend(devices.device_ids)
        return {name: tuple(ids) for name, ids in known.items()}

    def close(self) -> None:
        with self._lock:
            self._drop()

    # --- internals
    def _call(self, method: str, request: Any) -> Any:
        import grpc

        self._require_socket()
        with self._lock:
            stub = self._connect()
        try:
            return getattr(stub, method)(request, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            with self._lock:
                self._drop()
            code = exc.code() if hasattr(exc, "code") else None
            name = code.name if code is not None else "error"
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise PodResourcesError(f"{method}: no answer from the kubelet within {self.timeout_s:g}s",
                                        name) from None
            raise PodResourcesError(f"{method}: {name} {detail or ''}".strip(), name) from None

    def _require_socket(self) -> None:
        try:
            mode = os.stat(self.socket_path).st_mode
        except FileNotFoundError:
            raise SocketMissing(f"no pod-resources socket at {self.socket_path}") from None
        except OSError as exc:
            raise PodResourcesError(f"pod-resources socket {self.socket_path}: {exc.strerror}") from None
        if not stat.S_ISSOCK(mode):
            raise PodResourcesError(f"{self.socket_path} is not a socket")

    def _connect(self) -> Any:
        if self._stub is None:
            import grpc

            from agent.k8s import podresources_v1_pb2_grpc as pb_grpc

            self._channel = grpc.insecure_channel(
                f"unix://{self.socket_path}",
                options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                         ("grpc.enable_http_proxy", 0)],
            )
            self._stub = pb_grpc.PodResourcesListerStub(self._channel)
        return self._stub

    def _drop(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = None
        self._stub = None

