"""Flight-recorder analyzer outputs (tests/fixtures/fr_analysis/).

FORMATS: ``fr_trace_torch2.13_gloo_{hang,desync,complete}.txt`` are real output of torch 2.13's
``python -m torch.distributed.flight_recorder.fr_trace --prefix trace_`` over dumps made by
tests/fr_harness.py (4 ranks, gloo; pg_config repaired as the harness explains).
``fr_trace_mismatch_and_missing_dumps.txt`` is synthetic: its sentences are copied from the format
strings in torch/distributed/flight_recorder/components/utils.py and types.py; no capture shows them.
``analysis_flight_every_verdict.txt`` is synthetic: the sentences are the f-strings of Ascend/pytorch
tools/flight_recorder/analysis_flight.py (the newer version logs ``Path: %r``, hence the quotes); the
corpus holds one real-doc line of the second kind only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors import fr_analysis
from collectors.base import ParseError
from collectors.fr_analysis import FlightVerdict

FIXTURES = Path(__file__).parent / "fixtures" / "fr_analysis"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_torch_2_13_hang_names_the_missing_rank() -> None:
    analysis = fr_analysis.parse(fixture("fr_trace_torch2.13_gloo_hang.txt"))
    (finding,) = analysis.findings
    assert (analysis.tool, analysis.unparsed, analysis.clean) == ("fr_trace", (), False)
    assert (finding.kind, finding.collective_seq, finding.record_id, finding.entry_index) == (
        "missing_ranks", 5, 4, None)
    assert (finding.group, finding.collective, finding.state) == ("0:default_pg", "gloo:all_reduce", "scheduled")
    assert finding.missing_ranks == frozenset({3})
    assert (finding.expected_ranks, finding.expected_rank_count, finding.world_size) == (
        frozenset({0, 1, 2, 3}), 4, 4)
    assert (finding.input_sizes, finding.output_sizes) == ("[[3, 4]]", "[[3, 4]]")
    assert finding.stack[0].startswith("all_reduce at ") and finding.stack[0].endswith("distributed_c10d.py:3245")
    assert len(finding.stack) == 5


def test_torch_2_13_desync_names_the_culprits() -> None:
    (finding,) = fr_analysis.parse(fixture("fr_trace_torch2.13_gloo_desync.txt")).findings
    assert (finding.kind, finding.collective_seq, finding.collective) == ("collective_errors", 5, "gloo:broadcast")
    assert finding.missing_ranks is None
    assert finding.culprit_ranks == frozenset({0, 1, 2})
    assert finding.error_text is not None and finding.error_text.count("COLLECTIVE_TYPE_MISMATCH") == 3


def test_a_clean_run_prints_only_the_banner() -> None:
    analysis = fr_analysis.parse(fixture("fr_trace_torch2.13_gloo_complete.txt"))
    assert analysis.clean
    assert fr_analysis.parse("").clean


def test_size_mismatch_block_and_missing_dump_note() -> None:
    analysis = fr_analysis.parse(fixture("fr_trace_mismatch_and_missing_dumps.txt"))
    mismatch, missing_dumps = analysis.findings
    assert (mismatch.kind, mismatch.collective_seq, mismatch.record_id, mismatch.group) == (
        "size_mismatch", 12, 40, "3:tp_group")
    assert mismatch.extra == {"total input numel": "4096", "total output numel": "4104"}
    assert mismatch.stack == ("all_to_all at /opt/venv/lib/python3.11/site-packages/torch/distributed/"
                              "distributed_c10d.py:4400", "dispatch at /srv/train/moe.py:88")
    assert (missing_dumps.kind, missing_dumps.collective_seq, missing_dumps.missing_ranks) == (
        "missing_dumps", None, frozenset({6, 7}))
    assert analysis.unparsed == ()


def test_analysis_flight_every_verdict() -> None:
    analysis = fr_analysis.parse(fixture("analysis_flight_every_verdict.txt"))
    assert (analysis.tool, analysis.world_size, analysis.findings) == ("analysis_flight", 16, ())
    assert analysis.errors == ("Failed to load data from /var/log/fr/9: [Errno 2] No such file or directory: "
                               "'/var/log/fr/9'",)
    assert [(v.kind, v.pg_id, v.operator, v.rank) for v in analysis.verdicts] == [
        ("slow_collective", "0", "all_reduce", None),
        ("slow_compute", "1", None, 1),
        ("slow_after_collective", "2", "all_gather_into_tensor", None),
        ("unrecognized", None, None, None),
    ]
    assert isinstance(analysis.verdicts[0], FlightVerdict)
    assert analysis.verdicts[3].sentence == "The situation cannot be recognized!"


def test_unknown_lines_beside_findings_are_kept() -> None:
    text = fixture("fr_trace_torch2.13_gloo_hang.txt") + "Groups\nsome table row\n"
    analysis = fr_analysis.parse(text)
    assert len(analysis.findings) == 1
    assert analysis.unparsed == ("Groups", "some table row")


_NUMPY_WARNING = (
    "/venv/lib/python3.11/site-packages/torch/_subclasses/functional_tensor.py:368: UserWarning: Failed to "
    "initialize NumPy: No module named 'numpy' (Triggered internally at tensor_numpy.cpp:84.)\n"
    '  cpu = _conversion_method_template(device=torch.device("cpu"))\n'
)


@pytest.mark.parametrize("name", ["fr_trace_torch2.13_gloo_hang.txt", "fr_trace_torch2.13_gloo_complete.txt",
                                  "analysis_flight_every_verdict.txt"])
def test_python_warnings_on_stderr_are_not_analyzer_output(name: str) -> None:
    """An analyzer run where numpy is missing prints a warning and its source line before the verdicts."""
    bare = fr_analysis.parse(fixture(name))
    assert fr_analysis.parse(_NUMPY_WARNING + fixture(name)) == bare
    assert fr_analysis.parse(fixture(name) + _NUMPY_WARNING) == bare


def test_an_indented_line_not_after_a_warning_is_still_read() -> None:
    text = fixture("fr_trace_torch2.13_gloo_hang.txt") + "  indented table row\n"
    assert fr_analysis.parse(text).unparsed == ("indented table row",)


@pytest.mark.parametrize(("text", "message"), [
    ("Traceback (most recent call last):\nKeyError: ('0', 3)\n", "neither fr_trace findings"),
    ("Not all ranks joining collective, sequence number: 5\nthis is not a field\n", "key: value"),
    ("Not all ranks joining collective, sequence number: 5\nmissing ranks: everyone\n", "not a set of ranks"),
    ("2025-02-19 08:10:07,160 - INFO - World Size: 8\nstray text\n", "not an analysis_flight.py log line"),
])
def test_garbage_is_a_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        fr_analysis.parse(text)
