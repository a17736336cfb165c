"""What image-size and the build record read from `docker save`, fuzzed: a one-layer archive in Docker 20.10's
layout or the OCI image layout Docker 25 and later write, one JSON member kept, mutated, damaged or replaced
by random bytes (tests/support/fuzz_mutations.py), the archive perhaps cut short. It is measured, or refused
as a damaged archive (tarfile.TarError or ValueError, which `containers.image_size.saved_image` turns into
one line).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_fuzz_archives.py
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zlib
from typing import Any

from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st

from jaxbench.containers.saved_image import saved_layers
from tests.containers.test_image_size import tar_of
from tests.support import fuzz_mutations as mutations


def _blob_name(data: bytes) -> str:
    return f"blobs/sha256/{hashlib.sha256(data).hexdigest()}"


def _descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def saved_documents(oci: bool) -> dict[str, Any]:
    """The JSON members of a one-layer `docker save` archive: Docker 20.10's layout, or the OCI image layout
    that Docker 25 and later write (index.json → manifest → config and layer blobs)."""
    config = {"history": [{"created_by": "RUN /bin/sh -c pip install x"}], "rootfs": {"type": "layers"}}
    if not oci:
        manifest = [{"Config": "config.json", "RepoTags": ["x:y"], "Layers": ["1/layer.tar"]}]
        return {"config.json": config, "manifest.json": manifest}
    config_bytes = json.dumps(config).encode()
    manifest = {
        "schemaVersion": 2,
        "config": _descriptor("application/vnd.oci.image.config.v1+json", config_bytes),
        "layers": [_descriptor("application/vnd.oci.image.layer.v1.tar", LAYER_BYTES)],
    }
    manifest_bytes = json.dumps(manifest).encode()
    top = _descriptor("application/vnd.oci.image.manifest.v1+json", manifest_bytes)
    index = {"schemaVersion": 2, "manifests": [top]}
    return {_blob_name(config_bytes): config, _blob_name(manifest_bytes): manifest, "index.json": index}


LAYER_BYTES = tar_of({"opt/a.py": b"a layer's bytes " * 64, "usr/lib/b.so": bytes(range(256)) * 8}).getvalue()
"""A layer's tar of two files of two owners: its split is parsed, and cut short where the archive is."""


@st.composite
def saved_archives(draw: st.DrawFn) -> bytes:
    """A tar archive of those members, one of them as is, mutated, damaged or random bytes
    (tests/support/fuzz_mutations.py), the archive perhaps cut short; the layer is kept under each layout's
    name."""
    oci = draw(st.booleans())
    documents = saved_documents(oci)
    target = draw(st.sampled_from(sorted(documents)))
    members = {name: json.dumps(document).encode() for name, document in documents.items()}
    members[target] = draw(
        mutations.file_contents(st.just(documents[target]), mutations.dump_json, mutations.RAW_JSON)
    )
    members[_blob_name(LAYER_BYTES) if oci else "1/layer.tar"] = LAYER_BYTES
    archive = tar_of(members).getvalue()
    cut = draw(st.none() | st.integers(min_value=0, max_value=len(archive)))
    return archive if cut is None else archive[:cut]


def _owner(path: str) -> str:
    return "python" if path.startswith("/opt/") else "os"


@seed(zlib.crc32(b"saved-archive"))
@settings(max_examples=150, deadline=None, database=None, phases=(Phase.explicit, Phase.generate))
@given(archive=saved_archives())
def test_a_saved_archive_is_measured_or_refused_in_one_line(archive: bytes) -> None:
    """What image-size and the build record read from `docker save`: measured, or refused as a damaged
    archive (tarfile.TarError or ValueError, which `image_size.saved_image` turns into one line)."""
    try:
        layers = saved_layers(io.BytesIO(archive), _owner)
    except (tarfile.TarError, ValueError) as refused:
        assert "\n" not in str(refused).strip()
        return
    assert all(layer.bytes >= 0 and layer.compressed_bytes >= 0 for layer in layers)
    for layer in layers:  # whatever the documents around it say, the layer is read whole and split
        assert layer.bytes == len(LAYER_BYTES) and set(layer.owners) == {"python", "os"}
