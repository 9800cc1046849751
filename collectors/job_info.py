"""Job and rank of the process on each chip:
``npu_job_info{npu, chip, training_job, rank, local_rank, world_size, source} 1``.

The label is ``training_job``, not ``job``: ``job`` is Prometheus's own target label (the scrape job,
``npuwatch``), which a scraped ``job`` would either be renamed away from (``exported_job``) or, with
``honor_labels``, replace, so the series would escape every ``job="npuwatch"`` selector.

Pure: the processes of the ``npu-smi info`` table (or DCMI's, the same records) and a reader that
answers a pid's ``JobIdentity`` go in, samples come out. ``collectors.job_env`` reads the identities
from each process's environment (psutil, cached per pid and start time); the agent runs both as its
``npu_jobs`` job on the info interval.

Where the labels come from, first found wins (docs/metrics.md, "Job and rank of every chip"):

- ``training_job`` (``JobIdentity.job``): the operator's own variables
  (``collectors.npu_smi.job_variables``, e.g. one a Kubernetes job sets from a pod label; source
  ``env``); ``SLURM_JOB_ID`` (``slurm``), ``PBS_JOBID`` (``pbs``), ``LSB_JOBID`` (``lsf``); ``JOB_ID``,
  the variable HCCL and MindSpore jobs set (``env``);
  ``TORCHELASTIC_RUN_ID`` unless torchrun's default ``none``, else ``MASTER_ADDR:MASTER_PORT``
  (``torchrun``: every rank of one job rendezvous at one address; a loopback address is prefixed with
  the host name, ``node-7/localhost:29500``); ``MS_SCHED_HOST:MS_SCHED_PORT``
  (``mindspore``, its dynamic cluster's scheduler). None of them: the job is empty, the source ``none``.
- ``rank``: ``RANK``, ``RANK_ID`` (Ascend), ``SLURM_PROCID``, else the rank the HCCL rank table
  ``RANK_TABLE_FILE`` gives this chip's device id on this server.
- ``local_rank``: ``LOCAL_RANK``, ``SLURM_LOCALID``; ``world_size``: ``WORLD_SIZE``, ``RANK_SIZE``,
  ``SLURM_NTASKS``, ``MS_WORKER_NUM``, else the rank table's device count.

One series per chip at most: of the processes on a chip whose identity names a job or a rank, the
one holding the most device memory (then the lowest pid); a chip with none has no series. Values are
the process's own and may be hostile: a job id loses its control characters and is cut to
``MAX_JOB_CHARS``; a rank or size that is not a plain non-negative integer below ``MAX_RANK`` is
dropped (exported empty).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from collectors.base import ChipRef, Sample, label_pairs
from collectors.hccl.ranktable import RankTable
from collectors.npu_smi_info_records import NpuProcess

__all__ = [
    "MAX_JOB_CHARS",
    "MAX_RANK",
    "METRIC",
    "JobIdentity",
    "choose_process",
    "clean_text",
    "identity_from_environ",
    "job_samples",
    "rank_in_table",
    "rank_table_path",
]

METRIC = "npu_job_info"
MAX_JOB_CHARS = 128
MAX_RANK = 10**7  # far above any job's world size; a bigger "rank" is not one
_UINT_RE = re.compile(r"[0-9]{1,8}")
# C0 and C1 controls, DEL, and the Unicode line/paragraph separators: no label value carries them.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_TORCHRUN_DEFAULT_RUN_ID = "none"


@dataclass(frozen=True)
class JobIdentity:
    """What a process's environment says about its job. Empty strings: not known."""

    job: str = ""
    rank: str = ""
    local_rank: str = ""
    world_size: str = ""
    source: str = "none"

    @property
    def named(self) -> bool:
        """True when it names a job or a rank: only then is it exported."""
        return bool(self.job or self.rank)


def clean_text(value: str, max_chars: int = MAX_JOB_CHARS) -> str:
    """A label value from a process's environment: control characters removed, surrounding blanks
    stripped, cut to ``max_chars``."""
    return _CONTROL_RE.sub("", value).strip()[:max_chars]


def _uint(value: str | None) -> str:
    """A rank or size as exported: a plain non-negative integer below MAX_RANK, without leading zeros; else ""."""
    if value is None:
        return ""
    text = value.strip()
    if not _UINT_RE.fullmatch(text):
        return ""
    number = int(text)
    return str(number) if number < MAX_RANK else ""


def _first_uint(environ: Mapping[str, str], names: Sequence[str]) -> str:
    for name in names:
        value = _uint(environ.get(name))
        if value:
            return value
    return ""


# Batch schedulers' job ids, in order, after the operator's own variables (source ``env``).
_SCHEDULER_JOBS = (("SLURM_JOB_ID", "slurm"), ("PBS_JOBID", "pbs"), ("LSB_JOBID", "lsf"), ("JOB_ID", "env"))
# Rendezvous addresses every rank of one job shares: (host variable, port variable, source).
_RENDEZVOUS = (("MASTER_ADDR", "MASTER_PORT", "torchrun"), ("MS_SCHED_HOST", "MS_SCHED_PORT", "mindspore"))


_LOOPBACK = ("localhost", "127.", "::1", "[::1]")


def _rendezvous(environ: Mapping[str, str], host: str, port: str, node: str) -> str:
    """``host:port``; a loopback host (a single-node job) is told apart from other nodes' by ``node``."""
    address = clean_text(environ.get(host, ""))
    number = _uint(environ.get(port))
    if not (address and number):
        return ""
    local = address.lower() == "localhost" or address.startswith(_LOOPBACK[1:])
    return clean_text(f"{node}/{address}:{number}" if local and node else f"{address}:{number}")


def _job(environ: Mapping[str, str], job_variables: Sequence[str] = (), node: str = "") -> tuple[str, str]:
    """(job, source) from the environment; ("", "none") when it names no job."""
    named = [(name, "env") for name in job_variables]
    for name, source in (*named, *_SCHEDULER_JOBS):
        job = clean_text(environ.get(name, ""))
        if job:
            return job, source
    run_id = clean_text(environ.get("TORCHELASTIC_RUN_ID", ""))
    if run_id and run_id != _TORCHRUN_DEFAULT_RUN_ID:
        return run_id, "torchrun"
    for host, port, source in _RENDEZVOUS:
        job = _rendezvous(environ, host, port, node)
        if job:
            return job, source
    return "", "none"


def rank_table_path(environ: Mapping[str, str]) -> str:
    """The rank table the process points at (``RANK_TABLE_FILE``), "" when none or not a plain path."""
    path = environ.get("RANK_TABLE_FILE", "").strip()
    if not path or _CONTROL_RE.search(path) or "\x00" in path or len(path) > 4096:
        return ""
    return path


def identity_from_environ(environ: Mapping[str, str], table_rank: Callable[[], tuple[str, str]] | None = None,
                          job_variables: Sequence[str] = (), node: str = "") -> JobIdentity:
    """The job identity a process's environment gives. ``table_rank`` answers (rank, world size) from the
    rank table the environment points at; it is only called when no variable gives the rank.
    ``job_variables`` name the job before the built-in variables (``collectors.npu_smi.job_variables``);
    ``node`` (the host name) prefixes a loopback rendezvous address, which only one node's ranks share."""
    job, source = _job(environ, job_variables, node)
    rank = _first_uint(environ, ("RANK", "RANK_ID", "SLURM_PROCID"))
    world_size = _first_uint(environ, ("WORLD_SIZE", "RANK_SIZE", "SLURM_NTASKS", "MS_WORKER_NUM"))
    if not rank and table_rank is not None:
        rank, table_size = table_rank()
        world_size = world_size or table_size
    return JobIdentity(
        job=job,
        rank=rank,
        local_rank=_first_uint(environ, ("LOCAL_RANK", "SLURM_LOCALID")),
        world_size=world_size,
        source=source,
    )


def rank_in_table(table: RankTable, device_id: int, local_names: Iterable[str]) -> tuple[str, str]:
    """(rank, world size) of ``device_id`` on this server in ``table``; ("", "") when the table does not
    say. This server is the one whose ``server_id``, ``host_ip`` or ``container_ip`` is one of
    ``local_names`` (the host's addresses and name), else the table's only server."""
    names = set(local_names)
    servers = table.servers
    ours = [entry for entry in table.entries
            if {entry.server_id, entry.host_ip, entry.container_ip} & names]
    if not ours and len(servers) == 1:
        ours = list(table.entries)
    for entry in ours:
        if entry.device_id == device_id:
            return str(entry.rank), str(len(table.entries))
    return "", ""


def choose_process(processes: Sequence[NpuProcess], identity: Callable[[NpuProcess], JobIdentity | None]
                   ) -> tuple[NpuProcess, JobIdentity] | None:
    """The process that stands for its chip: of those whose identity names a job or a rank, the one with
    the most device memory (its rows summed), then the lowest pid; None when no process names one."""
    memory: dict[int, float] = {}
    first: dict[int, NpuProcess] = {}
    for process in processes:
        memory[process.pid] = memory.get(process.pid, 0.0) + (process.memory_bytes or 0.0)
        first.setdefault(process.pid, process)
    for pid in sorted(memory, key=lambda pid: (-memory[pid], pid)):
        found = identity(first[pid])
        if found is not None and found.named:
            return first[pid], found
    return None


def job_samples(processes: Iterable[NpuProcess], chips: Sequence[ChipRef],
                identity: Callable[[NpuProcess, ChipRef | None], JobIdentity | None]) -> list[Sample]:
    """One ``npu_job_info`` sample per chip whose processes name a job or a rank.

    ``chips`` are the agent's chip refs (their phy/logic ids reach ``identity`` for the rank table); a
    process on a chip they do not list is still attributed, with only its npu and chip ids.
    ``identity(process, chip)`` answers None when the process cannot be read (gone, not allowed).
    """
    by_chip: dict[tuple[int, int], list[NpuProcess]] = {}
    for process in processes:
        by_chip.setdefault((process.npu, process.chip), []).append(process)
    refs = {(chip.npu, chip.chip): chip for chip in chips}
    out: list[Sample] = []
    for (npu, chip_id), listed in sorted(by_chip.items()):
        ref = refs.get((npu, chip_id))
        chosen = choose_process(listed, lambda process: identity(process, ref))  # noqa: B023 (called right here)
        if chosen is None:
            continue
        found = chosen[1]
        labels = label_pairs(npu=npu, chip=chip_id, training_job=found.job, rank=found.rank,
                             local_rank=found.local_rank, world_size=found.world_size, source=found.source)
        out.append(Sample(METRIC, labels, 1.0))
    return out
