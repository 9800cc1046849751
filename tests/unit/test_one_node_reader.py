"""One chip list: the daemon's (``collectors.sources.chip_refs`` over its store), check's and diagnose's
(``agent.health.node.read_chip_list``) and bundle's (``tools/chips.json``, its per-chip and per-port snapshots)
are the same chips for the same tool answers, including an ``info -m`` that prints garbage.

The tools are the demo's renderers, replayed in process through a ``NodeReader``.
"""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import build_config
from agent.demo import fake_hccn_tool, fake_npu_smi
from agent.demo.node import DemoNode
from agent.health.node import port_devices, read_chip_list
from agent.health.readings import Reading
from agent.triage.bundle import _Manifest, _snapshot_with, _Writer
from collectors import npu_smi_info, npu_smi_mapping, sources
from collectors.base import ChipRef, ParseError, Source
from collectors.hccn_link import device_id


class Replay:
    """A NodeReader over the demo's renderers; ``garbage`` names the argv (tool first) that print junk."""

    parallelism = 2

    def __init__(self, directory: Path, garbage: tuple[str, ...] = (), max_chips: int = 64) -> None:
        self.state = DemoNode(directory).read()
        self.garbage = garbage
        self.max_chips = max_chips
        self.now = time.time()

    def text(self, source: Source, chip: ChipRef | None) -> str:
        argv = source.argv(chip)
        if (source.tool, *argv) == self.garbage:
            return "\x1b[31mjunk ### 0x7f\n??\n"
        render = fake_npu_smi.render if source.tool == "npu-smi" else fake_hccn_tool.render
        return render(self.state, self.now, argv).stdout

    def read(self, source: Source, chip: ChipRef | None = None, parse: Any = None) -> Reading:
        text = self.text(source, chip)
        try:
            return Reading(value=(parse or source.parse)(text), at=time.monotonic())
        except (ParseError, ValueError) as exc:
            return Reading(error=f"unreadable output: {exc}", at=time.monotonic())

    def read_direct(self, source: Source, chip: ChipRef | None = None, *, one: bool = False) -> None:
        return None

    def skipped(self) -> list[str]:
        return []

    def hung(self) -> list[str]:
        return []


class Store:
    """The daemon's snapshot store as far as ``sources.chip_refs`` reads it: each Source's parsed records."""

    def __init__(self, reader: Replay) -> None:
        self._records: dict[str, Any] = {}
        # the daemon's Source for npu-smi info is made with collectors.npu_smi.max_chips
        for source in (npu_smi_info.make_source(reader.max_chips), npu_smi_mapping.SOURCE):
            with contextlib.suppress(ParseError):  # a failed run: the store keeps no records for it
                self._records[source.name] = source.parse(reader.text(source, None))

    def records(self, source: str) -> Any:
        return self._records.get(source)

    def get(self, source: str) -> Any:
        return None


def bundled(reader: Replay, conf: Path) -> tuple[dict[str, bytes], _Manifest]:
    config = build_config({"collectors": {"hccn_tool": {"hccn_conf": str(conf)}}})
    manifest = _Manifest("node", time.time(), time.time() - 60)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _snapshot_with(reader, config, _Writer(tar, "top", time.time(), manifest), lambda text: None)  # type: ignore[arg-type]
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        members = {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                   for m in tar.getmembers() if m.isreg()}
    return members, manifest


def bundle_chips(members: dict[str, bytes]) -> list[tuple[int, int, int]]:
    return [(row["npu"], row["chip"], row["device"]) for row in json.loads(members["tools/chips.json"])]


def keyed(chips: list[ChipRef]) -> list[tuple[int, int, int]]:
    return [(ref.npu, ref.chip, device_id(ref)) for ref in chips]


@pytest.mark.parametrize(("garbage", "max_chips", "seen"), [((), 64, 4), (("npu-smi", "info", "-m"), 64, 4),
                                                          ((), 3, 0)],
                         ids=["answers", "info-m-garbage", "over-max-chips"])
def test_daemon_check_and_bundle_list_the_same_chips(tmp_path: Path, garbage: tuple[str, ...], max_chips: int,
                                                     seen: int) -> None:
    DemoNode(tmp_path / "node").create(chips=4)
    reader = Replay(tmp_path / "node", garbage, max_chips)
    daemon = keyed(sources.chip_refs(Store(reader)))
    _, chips = read_chip_list(reader)
    members, manifest = bundled(reader, tmp_path / "missing.conf")
    assert len(daemon) == seen
    assert keyed(chips) == daemon
    assert bundle_chips(members) == daemon
    snapshotted = sorted({name.split("/")[2] for name in members if name.startswith("tools/npu-smi/")
                          and name.count("/") == 3})
    assert snapshotted == sorted(f"{npu}-{chip}" for npu, chip, _ in daemon)
    ports = sorted({int(name.split("/")[2]) for name in members if name.startswith("tools/hccn_tool/")})
    assert ports == sorted({device for _, _, device in daemon})
    if garbage:
        assert any("info -m: unreadable" in failure for failure in manifest.failed)
    if not seen:
        assert any("more than max_chips=3" in failure for failure in manifest.failed)


def test_without_a_chip_list_the_ports_are_hccn_confs(tmp_path: Path) -> None:
    DemoNode(tmp_path / "node").create(chips=2)
    reader = Replay(tmp_path / "node", ("npu-smi", "info"))
    conf = tmp_path / "hccn.conf"
    conf.write_text("address_0=10.0.0.1\nnetmask_0=255.255.255.0\naddress_3=10.0.0.4\nnetmask_3=255.255.255.0\n")
    members, manifest = bundled(reader, conf)
    assert bundle_chips(members) == []
    assert sorted({int(name.split("/")[2]) for name in members if name.startswith("tools/hccn_tool/")}) == [0, 3]
    assert port_devices([], conf) == [0, 3]
    assert port_devices([], tmp_path / "missing.conf") == []
    assert any("npu-smi info: unreadable" in failure for failure in manifest.failed)

