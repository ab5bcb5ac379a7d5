"""Regenerate the committed api/*_pb2.py, *_pb2_grpc.py and .pyi from every proto in PROTOS.

Usage: python tools/gen_proto.py [OUTPUT_ROOT]   (default: the repository root)
The test suite calls this into a temporary directory and compares with the committed files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTOS = (
    "api/deviceplugin.proto",
    "api/dra_v1beta1.proto",
    "api/dra_v1.proto",
    "api/pluginregistration.proto",
    "api/dra_health_v1alpha1.proto",
    "api/dra_health_v1.proto",
    "api/podresources_v1.proto",
)


def generate(output_root: Path) -> None:
    (output_root / "api").mkdir(parents=True, exist_ok=True)
    for proto in PROTOS:
        args = [
            "protoc",
            f"-I{REPO_ROOT}",
            f"--python_out={output_root}",
            f"--pyi_out={output_root}",
            f"--grpc_python_out={output_root}",
            str(REPO_ROOT / proto),
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed for {proto}")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT)
