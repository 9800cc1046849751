"""Regenerate the pod-resources gRPC stubs from ``podresources_v1.proto``.

``python -m agent.k8s.protogen`` rewrites ``podresources_v1_pb2.py`` (with its ``.pyi`` types) and
``podresources_v1_pb2_grpc.py``
with grpcio-tools (the ``test`` extra pins the version that made the committed files);
``--check`` only compares and exits 1 when a committed file differs from what the tools make now.
The proto is compiled from the repository root, so the generated imports name ``agent.k8s``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["GENERATED", "PROTO", "generate", "main"]

REPO = Path(__file__).resolve().parents[2]
PROTO = "agent/k8s/podresources_v1.proto"
GENERATED = ("agent/k8s/podresources_v1_pb2.py", "agent/k8s/podresources_v1_pb2.pyi",
             "agent/k8s/podresources_v1_pb2_grpc.py")
PROTOC_TIMEOUT_S = 120


def generate() -> dict[str, bytes]:
    """What grpcio-tools makes of the proto now: ``{relative path: content}``."""
    with tempfile.TemporaryDirectory(prefix="npuwatch-protogen-") as out:
        argv = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={REPO}", f"--python_out={out}",
                f"--pyi_out={out}", f"--grpc_python_out={out}", str(REPO / PROTO)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=PROTOC_TIMEOUT_S, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"grpc_tools.protoc failed ({result.returncode}): {result.stderr.strip()}")
        return {name: (Path(out) / name).read_bytes() for name in GENERATED}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.k8s.protogen", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files; exit 1 on a difference")
    args = parser.parse_args(argv)
    fresh = generate()
    stale = [name for name, content in fresh.items()
             if not (REPO / name).exists() or (REPO / name).read_bytes() != content]
    if args.check:
        for name in stale:
            print(f"{name}: differs from what {PROTO} generates now", file=sys.stderr)
        return 1 if stale else 0
    for name in stale:
        (REPO / name).write_bytes(fresh[name])
        print(f"wrote {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
