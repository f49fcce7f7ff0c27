"""Regenerate patchsync/_proto/*_pb2.py from proto/*.proto.

Run with the dev extra installed: ``python scripts/gen_proto.py``. The output depends only
on the .proto files and the pinned grpcio-tools version, so tests/test_proto.py can
regenerate into a temporary folder and fail when the committed modules are stale.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "patchsync" / "_proto"
SOURCES = ("rdf.proto", "patch.proto", "jena_rdf.proto", "grpc.proto", "patchsync/v1/patch_service.proto")
#: Schemas with services: their gRPC stubs are generated too.
SERVICES = ("grpc.proto", "patchsync/v1/patch_service.proto")


def generate(out_dir: Path) -> None:
    """Compile the schemas into ``out_dir`` as modules of the ``patchsync._proto`` package."""
    from grpc_tools import protoc  # dev-only dependency

    with tempfile.TemporaryDirectory() as tmp:
        # patchsync's own schemas are compiled under their file name, so every module
        # lands in one flat package beside the Jelly ones.
        includes = [f"-I{PROTO_DIR / 'patchsync' / 'v1'}", f"-I{PROTO_DIR}"]
        args = ["protoc", *includes, f"--python_out={tmp}", f"--pyi_out={tmp}"]
        code = protoc.main([*args, *(str(PROTO_DIR / s) for s in SOURCES)])
        if code == 0:
            stubs = ["protoc", *includes, f"--grpc_python_out={tmp}"]
            code = protoc.main([*stubs, *(str(PROTO_DIR / s) for s in SERVICES)])
        if code != 0:
            raise SystemExit(f"protoc failed with exit code {code}")
        out_dir.mkdir(parents=True, exist_ok=True)
        for produced in sorted(Path(tmp).iterdir()):
            text = produced.read_text(encoding="utf-8")
            # protoc writes top-level imports; ours live inside a package.
            text = re.sub(r"^import (\w+_pb2) as", r"from . import \1 as", text, flags=re.M)
            text = re.sub(r"^import (\w+_pb2)$", r"from . import \1", text, flags=re.M)
            (out_dir / produced.name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR)
