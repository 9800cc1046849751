"""Chip readings from the driver's management library, ``libdcmi.so`` (issue 23).

DCMI answers in microseconds what a forked ``npu-smi`` answers in seconds, but it is a C library
in the reader's address space: a wedged or crashing call would take the agent with it. So the
library is only ever loaded by a helper process (``worker``), which the agent drives over JSON
lines and kills when a call overruns its deadline (``agent.dcmi.client``).

- ``library``: find ``libdcmi.so`` and refuse a file an unprivileged user could have replaced.
- ``errors``: the library's return codes and the typed errors every layer raises.
- ``structs``: the ctypes layouts of the structs read.
- ``readings``: what one call returns, in the library's own units (JSON in, JSON out).
- ``api``: ``Dcmi``, the ctypes wrapper: lazy symbols, ``dcmiv2_*`` preferred, card/device API else.
- ``worker``: the helper process (Python 3.8+, standard library only).
- ``records``: readings -> the npu-smi parsers' record types (and units), for their sample builders.
- ``plans``: which sources DCMI serves and with which calls (``agent.dcmi.backend`` runs them).

docs/dcmi.md describes the design.
"""
