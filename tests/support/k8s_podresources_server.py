"""A real gRPC server of the kubelet's pod-resources v1 API on a Unix socket, for the tests.

It serves ``List`` and ``GetAllocatableResources`` from what the test sets (pods come and go), can
answer slowly, can answer UNIMPLEMENTED for ``GetAllocatableResources`` as kubelets before 1.23 do,
and can stop and start again with its socket gone in between, as a restarting kubelet does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from agent.k8s import podresources_v1_pb2 as pb
from agent.k8s import podresources_v1_pb2_grpc as pb_grpc


@dataclass
class FakePod:
    namespace: str
    name: str
    # container -> [(resource, [device IDs])]
    containers: dict[str, list[tuple[str, list[str]]]] = field(default_factory=dict)


class _Servicer(pb_grpc.PodResourcesListerServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self.kubelet = kubelet

    def List(self, request: Any, context: Any) -> Any:
        self.kubelet.list_calls += 1
        if self.kubelet.list_delay_s:
            time.sleep(self.kubelet.list_delay_s)
        with self.kubelet.lock:
            pods = list(self.kubelet.pods)
        response = pb.ListPodResourcesResponse()
        for pod in pods:
            message = response.pod_resources.add(name=pod.name, namespace=pod.namespace)
            for container_name, devices in pod.containers.items():
                container = message.containers.add(name=container_name)
                container.cpu_ids.extend([2, 3])  # fields npuwatch does not read are there, as on a real kubelet
                for resource, ids in devices:
                    entry = container.devices.add(resource_name=resource, device_ids=ids)
                    entry.topology.nodes.add(ID=0)
        return response

    def GetAllocatableResources(self, request: Any, context: Any) -> Any:
        if not self.kubelet.allocatable_implemented:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "unknown method GetAllocatableResources")
        response = pb.AllocatableResourcesResponse()
        with self.kubelet.lock:
            allocatable = dict(self.kubelet.allocatable)
        for resource, ids in allocatable.items():
            response.devices.add(resource_name=resource, device_ids=ids)
        response.cpu_ids.extend(range(8))
        return response


class FakeKubelet:
    """``with FakeKubelet() as kubelet:``; ``kubelet.socket`` is the path to give the agent."""

    def __init__(self) -> None:
        # A short directory: a Unix socket path must stay under 108 bytes.
        self.directory = Path(tempfile.mkdtemp(prefix="npw-pr-", dir="/tmp"))
        self.socket = str(self.directory / "kubelet.sock")
        self.lock = threading.Lock()
        self.pods: list[FakePod] = []
        self.allocatable: dict[str, list[str]] = {}
        self.allocatable_implemented = True
        self.list_delay_s = 0.0
        self.list_calls = 0
        self._server: Any = None

    def start(self) -> FakeKubelet:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_PodResourcesListerServicer_to_server(_Servicer(self), server)
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        """Stop serving and remove the socket, as a kubelet restart does."""
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
        if os.path.exists(self.socket):
            os.unlink(self.socket)

    def set_pods(self, *pods: FakePod) -> None:
        with self.lock:
            self.pods = list(pods)

    def __enter__(self) -> FakeKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
