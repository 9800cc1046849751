"""The committed pod-resources stubs are what the proto generates, and the proto says what the kubelet speaks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent.k8s import podresources_v1_pb2 as pb
from agent.k8s.protogen import GENERATED, generate
from tests.support.paths import REPO

# Field numbers of the kubelet's pod-resources v1 API (k8s.io/kubelet/pkg/apis/podresources/v1/api.proto):
# a different number is a different field on the wire.
WIRE = {
    "ListPodResourcesResponse": {"pod_resources": 1},
    "PodResources": {"name": 1, "namespace": 2, "containers": 3},
    "ContainerResources": {"name": 1, "devices": 2, "cpu_ids": 3, "memory": 4},
    "ContainerDevices": {"resource_name": 1, "device_ids": 2, "topology": 3},
    "ContainerMemory": {"memory_type": 1, "size": 2, "topology": 3},
    "TopologyInfo": {"nodes": 1},
    "NUMANode": {"ID": 1},
    "AllocatableResourcesResponse": {"devices": 1, "cpu_ids": 2, "memory": 3},
    "ListPodResourcesRequest": {},
    "AllocatableResourcesRequest": {},
}


def test_regenerating_the_stubs_gives_the_committed_files() -> None:
    fresh = generate()
    assert set(fresh) == set(GENERATED)
    for name, content in fresh.items():
        assert (REPO / name).read_bytes() == content, f"{name} is stale: run python -m agent.k8s.protogen"


def test_the_check_mode_fails_on_a_stale_file(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "agent.k8s.protogen", "--check"], cwd=REPO,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    # A proto edited without regenerating is caught: compile a changed copy and compare.
    changed = (REPO / "agent/k8s/podresources_v1.proto").read_text().replace("string memory_type = 1;",
                                                                           "string memory_type = 9;")
    assert "memory_type = 9" in changed
    (tmp_path / "agent" / "k8s").mkdir(parents=True)
    (tmp_path / "agent" / "k8s" / "podresources_v1.proto").write_text(changed)
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={tmp_path}", f"--python_out={out}",
                    str(tmp_path / "agent/k8s/podresources_v1.proto")], check=True, timeout=120)
    assert (out / GENERATED[0]).read_bytes() != (REPO / GENERATED[0]).read_bytes()


def test_messages_and_field_numbers_are_the_kubelets() -> None:
    assert pb.DESCRIPTOR.package == "v1"
    for message, fields in WIRE.items():
        descriptor = pb.DESCRIPTOR.message_types_by_name[message]
        assert {f.name: f.number for f in descriptor.fields} == fields, message
    service = pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert service.full_name == "v1.PodResourcesLister"
    assert {m.name: (m.input_type.name, m.output_type.name) for m in service.methods} == {
        "List": ("ListPodResourcesRequest", "ListPodResourcesResponse"),
        "GetAllocatableResources": ("AllocatableResourcesRequest", "AllocatableResourcesResponse"),
    }


def test_an_answer_with_fields_npuwatch_does_not_know_still_parses() -> None:
    # A newer kubelet adds dynamic_resources (field 5 of ContainerResources): bytes 0x2a <len> ...
    container = pb.ContainerResources(name="worker")
    container.devices.add(resource_name="huawei.com/Ascend910", device_ids=["Ascend910-1"])
    wire = container.SerializeToString() + bytes([0x2A, 0x03, 0x0A, 0x01, 0x78])
    parsed = pb.ContainerResources.FromString(wire)
    assert parsed.name == "worker" and list(parsed.devices[0].device_ids) == ["Ascend910-1"]
