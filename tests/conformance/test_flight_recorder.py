"""The flight-recorder dump reader over the corpus: the printed tutorial dump."""

from __future__ import annotations

import pytest

from collectors import flight_recorder
from collectors.base import ParseError
from collectors.flight_recorder import FrFrame, PgConfig, PgProgress
from tests.support.paths import CORPUS

TOOLS = CORPUS / "tools"
if not TOOLS.is_dir():
    pytest.skip(f"corpus not found at {CORPUS}", allow_module_level=True)


def text_of(prefix: str) -> str:
    (path,) = TOOLS.glob(f"{prefix}*")
    return path.read_text()


def test_printed_tutorial_dump() -> None:
    printed = text_of("flight-recorder_dump-unpickled__")
    # As printed it is neither JSON nor a pickle (a Python tuple, and '...' for the elided entries) ...
    with pytest.raises(ParseError, match="not valid JSON"):
        flight_recorder.parse_dump(printed.encode())
    # ... so undo only those two print artefacts (INDEX.md) before parsing.
    assert printed.count('("0", "default_pg")') == 1
    lines = [line for line in printed.replace('("0", "default_pg")', '["0", "default_pg"]').splitlines()
             if line.strip() != "..."]
    text = "\n".join(lines).replace("},\n    ]", "}\n    ]")
    dump = flight_recorder.parse_dump(text.encode(), rank=0)
    assert dump.version == "2.5"
    assert dump.pg_config == {"0": PgConfig(key="0", name="0", desc="default_pg", ranks=(0, 1))}
    assert dump.progress == {0: PgProgress(pg_id=0, last_enqueued_seq=2, last_started_seq=None,
                                           last_completed_seq=2, source="pg_status")}
    (entry,) = dump.entries
    assert (entry.record_id, entry.pg_id, entry.process_group) == (0, 0, ("0", "default_pg"))
    assert (entry.collective_seq_id, entry.p2p_seq_id, entry.op_id, entry.is_p2p) == (1, 0, 1, False)
    assert (entry.profiling_name, entry.collective, entry.state, entry.retired) == (
        "nccl:all_reduce", "all_reduce", "completed", True)
    assert (entry.input_sizes, entry.output_sizes, entry.input_dtypes, entry.output_dtypes) == (
        ((3, 4),), ((3, 4),), ("Float",), ("Float",))
    assert (entry.time_created_ns, entry.time_discovered_started_ns, entry.time_discovered_completed_ns) == (
        1724779239936775119, None, 1724779239975811724)
    assert entry.timeout_ms == 600000
    assert entry.frames == (
        FrFrame("test_short_pickle", "pytorch/test/distributed/test_c10d_nccl.py", 3647),
        FrFrame("spawn_main", ".conda/envs/pytorch-3.10/lib/python3.10/multiprocessing/spawn.py", 116),
        FrFrame("<module>", "<string>", 1),
    )
