"""scripts/check-image-ca (the image test's last check): a CA certificate the build was given is found in
any layer of a real image, each certificate is named, and an image that holds none passes; an image that
cannot be read is an error, not a pass. Needs a Docker engine (skipped where none answers; .ci/run starts
one).
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.docker

CHECK = str(REPO / "scripts" / "check-image-ca")


def _certificate(path: Path, second_line: str) -> Path:
    path.write_text(
        f"-----BEGIN CERTIFICATE-----\nMIIB{uuid.uuid4().hex}\n{second_line}\n-----END CERTIFICATE-----\n"
    )
    return path


@pytest.fixture
def image(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A one-layer image whose file holds a leaked certificate line, and that line."""
    if not shutil.which("docker") or subprocess.run(["docker", "version"], capture_output=True).returncode:
        pytest.skip("no Docker engine answers (docker version); scripts/start-dockerd starts one")
    leaked = f"LEAKED{uuid.uuid4().hex}"
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "bundle.pem").write_text(f"some bytes before\n{leaked}\nand after\n")
    layer = tmp_path / "layer.tar"
    with tarfile.open(layer, "w") as archive:
        archive.add(tmp_path / "etc", arcname="etc")
    reference = f"jaxbench-test/ca-check:{uuid.uuid4().hex[:12]}"
    subprocess.run(["docker", "import", str(layer), reference], check=True, capture_output=True)
    try:
        yield reference, leaked
    finally:
        subprocess.run(["docker", "image", "rm", "--force", reference], capture_output=True)


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHECK, *args], capture_output=True, text=True, timeout=120)


def test_a_certificate_in_a_layer_is_found_and_named(image: tuple[str, str], tmp_path: Path) -> None:
    reference, leaked = image
    clean = _certificate(tmp_path / "clean.crt", f"NOTHERE{uuid.uuid4().hex}")
    found = _certificate(tmp_path / "leaked.crt", leaked)
    done = _check(reference, str(clean), str(found))
    assert done.returncode == 1, done
    assert f"an image layer of {reference} holds {found}" in done.stderr
    assert f"{clean}: in no layer and no history entry" in done.stdout


def test_an_image_without_the_certificates_passes(image: tuple[str, str], tmp_path: Path) -> None:
    reference, _ = image
    clean = [_certificate(tmp_path / f"clean{n}.crt", f"NOTHERE{uuid.uuid4().hex}") for n in range(2)]
    done = _check(reference, *map(str, clean))
    assert done.returncode == 0, done
    assert done.stdout.count("in no layer and no history entry") == 2


def test_an_image_that_cannot_be_read_is_an_error(image: tuple[str, str], tmp_path: Path) -> None:
    done = _check(f"{image[0]}-missing", str(_certificate(tmp_path / "a.crt", "ANYTHING")))
    assert done.returncode == 2, done
