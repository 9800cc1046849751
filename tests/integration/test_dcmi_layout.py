"""The ctypes structs of collectors.dcmi.structs lay out exactly as the C compiler lays out the reference
header's (shared/reference/dcmi/dcmi_interface_api.h, or $NPUWATCH_REFERENCE/dcmi): a small C program
compiled against the header prints each struct's size and each field's offset, and every one must equal
ctypes'. Integration tier: it runs the compiler. Skips when the reference directory or a C compiler is absent.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest

from collectors.dcmi.structs import LAYOUTS
from tests.support.fake_dcmi import compiler
from tests.support.paths import REFERENCE

HEADER = REFERENCE / "dcmi" / "dcmi_interface_api.h"


def program() -> str:
    """C that prints ``struct size N`` and ``struct.field offset N`` lines for every declared struct."""
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "dcmi_interface_api.h"', "int main(void) {"]
    for cls, c_name in LAYOUTS:
        lines.append(f'    printf("{c_name} size %zu\\n", sizeof(struct {c_name}));')
        for field, *_ in cls._fields_:
            lines.append(f'    printf("{c_name}.{field} offset %zu\\n", offsetof(struct {c_name}, {field}));')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def expected() -> dict[str, int]:
    facts = {}
    for cls, c_name in LAYOUTS:
        facts[f"{c_name} size"] = ctypes.sizeof(cls)
        for field, *_ in cls._fields_:
            facts[f"{c_name}.{field} offset"] = getattr(cls, field).offset
    return facts


def c_layout(tmp_path: Path) -> dict[str, int]:
    source = tmp_path / "layout.c"
    source.write_text(program())
    binary = tmp_path / "layout"
    # The header declares every function `static` (DCMIDLLEXPORT) without a body: unused, so only a warning.
    built = subprocess.run([str(compiler()), "-std=gnu11", "-w", f"-I{HEADER.parent}", "-o", str(binary),
                            str(source)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    output = subprocess.run([str(binary)], capture_output=True, text=True, timeout=30, check=True).stdout
    facts = {}
    for line in output.splitlines():
        key, _, value = line.rpartition(" ")
        facts[key] = int(value)
    return facts


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    if not HEADER.is_file():
        pytest.skip(f"no reference header at {HEADER} (set NPUWATCH_REFERENCE)")
    if compiler() is None:
        pytest.skip("no C compiler (cc/gcc): apt-get install gcc libc6-dev")
    return c_layout(tmp_path_factory.mktemp("dcmi-layout"))


def test_every_struct_and_field_matches_the_reference_header(layout: dict[str, int]) -> None:
    assert layout == expected()


def test_the_program_covers_every_declared_struct(layout: dict[str, int]) -> None:
    sizes = {key for key in layout if key.endswith(" size")}
    assert sizes == {f"{c_name} size" for _, c_name in LAYOUTS}
    assert layout["dcmi_pcie_info_all size"] == 64  # the header's own comment
    # The header's comment says 96, which holds only where unsigned long is 4 bytes: on the LP64 Linux of
    # Ascend nodes the three unsigned longs (and the padding before the first) make it 112.
    assert layout["dcmi_get_memory_info_stru size"] == (96 if ctypes.sizeof(ctypes.c_ulong) == 4 else 112)
