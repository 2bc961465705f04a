"""Write a KubeRay CRD's v1 schema (its ``openAPIV3Schema``) as gzipped JSON, for the test.

    python tests/examples/kuberay_crds/extract.py ray.io_rayjobs.yaml rayjobs.v1.schema.json.gz

The CRD file is ``ray-operator/config/crd/bases/ray.io_<kind>s.yaml`` in KubeRay's repository.
The schema is kept verbatim (descriptions too, so a failure can be read against it); the
output is byte-for-byte the same for the same input (sorted keys, no time in the gzip header),
so a refresh shows as a change only when the schema changed.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import yaml

VERSION = "v1"  # the version KubeRay serves and stores; v1alpha1 is served, not stored


def schema_of(crd_yaml: str) -> dict:
    crd = yaml.safe_load(crd_yaml)
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    if not (version["served"] and version["storage"]):
        raise SystemExit(f"{crd['metadata']['name']}: {VERSION} is no longer the stored version")
    return version["schema"]["openAPIV3Schema"]


def main(crd_path: str, out_path: str) -> None:
    schema = schema_of(Path(crd_path).read_text(encoding="utf-8"))
    data = json.dumps(schema, sort_keys=True, separators=(",", ":")).encode()
    Path(out_path).write_bytes(gzip.compress(data, compresslevel=9, mtime=0))


if __name__ == "__main__":
    main(*sys.argv[1:])
