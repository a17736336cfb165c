"""How big an image is and where the bytes are: per layer (the Dockerfile step that made it) and per group of
installed packages (CUDA libraries, jaxlib, TransformerEngine, frameworks, Python, OS), each uncompressed
and compressed as a registry stores it (gzip at Docker's default level), largest first.

One pass measures both: `docker save` read as a stream (nothing written to disk), each layer's tar
deflated once and its bytes split among the owners of its files (containers/owned_deflate.py), who owns
which file told by size_probe.py run inside the image. A package's share is what the registry stores for
it, copies a later layer shadows included, so the groups and the layers add up to the same total. The
docker calls are adapters; grouping and the report are pure.

    jaxbench image-size ghcr.io/jaxbench/jax:jax-2026-11-24 [--json]
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import subprocess
import tarfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from jaxbench.containers.owned_deflate import NOT_A_TAR, OwnerOf
from jaxbench.containers.saved_image import saved_layers as saved_archive_layers
from jaxbench.containers.size_probe import bucket_of
from jaxbench.core.errors import ExternalFailure
from jaxbench.core.terminal import safe_text

PROBE = Path(__file__).resolve().parent / "size_probe.py"

GROUPS = ("CUDA libraries", "jaxlib", "TransformerEngine", "frameworks", "Python", "OS")
_JAXLIB = re.compile(r"^(jax|jaxlib|jax-cuda\d+-(plugin|pjrt))$")
_FRAMEWORKS = {"flax", "optax", "orbax-checkpoint", "maxtext", "levanter", "haliax", "t5x", "paxml", "praxis"}
_CUDA = re.compile(r"^(nvidia-.*|cuda-(bindings|core|pathfinder|python|toolkit))$")


def normalise(distribution: str) -> str:
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def group_of(bucket: str) -> str:
    """The package group of a probe bucket: a distribution's name, "(python)" or "(os)" (or the tar headers
    of a layer without file data, which the file system's are)."""
    if bucket in ("(os)", NOT_A_TAR):
        return "OS"
    name = normalise(bucket)
    if _CUDA.match(name):
        return "CUDA libraries"
    if _JAXLIB.match(name):
        return "jaxlib"
    if name.startswith("transformer-engine"):
        return "TransformerEngine"
    if name in _FRAMEWORKS:
        return "frameworks"
    return "Python"


@dataclasses.dataclass(frozen=True)
class Size:
    name: str
    bytes: int
    compressed_bytes: int


def group_sizes(buckets: Mapping[str, Mapping[str, int]]) -> list[Size]:
    """Buckets summed by group, largest compressed first."""
    totals = {group: [0, 0] for group in GROUPS}
    for bucket, size in buckets.items():
        total = totals[group_of(bucket)]
        total[0] += size["bytes"]
        total[1] += size["compressed_bytes"]
    sizes = [Size(group, plain, packed) for group, (plain, packed) in totals.items()]
    return sorted(sizes, key=lambda s: (-s.compressed_bytes, s.name))


def largest_distributions(buckets: Mapping[str, Mapping[str, int]], count: int = 10) -> list[Size]:
    sizes = [
        Size(name, size["bytes"], size["compressed_bytes"])
        for name, size in buckets.items()
        if name not in ("(os)", "(python)", NOT_A_TAR)
    ]
    return sorted(sizes, key=lambda s: (-s.compressed_bytes, s.name))[:count]


@dataclasses.dataclass(frozen=True)
class Measured:
    layers: list[Size]
    """Named by the history step that made each, in build order."""
    buckets: dict[str, dict[str, int]]
    """owner (a distribution, "(python)", "(os)") -> {"bytes", "compressed_bytes"}, over all layers."""


def measure_archive(archive: IO[bytes], owner_of: OwnerOf | None = None) -> Measured:
    """A `docker save` archive (read as a stream, either layout: containers/saved_image.py), per layer and
    per owner of its files."""
    saved = saved_archive_layers(archive, owner_of)
    buckets: dict[str, dict[str, int]] = {}
    for layer in saved:
        for owner, (plain, packed) in layer.owners.items():
            total = buckets.setdefault(owner, {"bytes": 0, "compressed_bytes": 0})
            total["bytes"] += plain
            total["compressed_bytes"] += packed
    layers = [Size(step_name(layer.created_by), layer.bytes, layer.compressed_bytes) for layer in saved]
    return Measured(layers, buckets)


_BUILD_ARGS = re.compile(r"^\|(\d+) ")
_SHELL = re.compile(r"^/bin/(ba)?sh (-o pipefail )?-c ")
_BUILDKIT = re.compile(r"^(RUN|COPY|ADD|ENV|ARG|WORKDIR|USER|LABEL|SHELL|ENTRYPOINT|CMD|EXPOSE|VOLUME) ")
_COPY = re.compile(r"^#\(nop\) (COPY|ADD) (?:dir|file|multi):[0-9a-f]+ in (\S+)")


def step_name(created_by: str) -> str:
    """A history step as a reader knows it: `RUN <command>` without the build arguments the builder puts in
    front, `COPY … in <folder>`, or the imported base; shortened. BuildKit (Docker's builder since 23)
    writes the instruction itself ("RUN |1 A=1 /bin/sh -c make # buildkit", "COPY a/ /b/ # buildkit")."""
    text = created_by.strip().removesuffix("# buildkit").strip()
    if (instruction := _BUILDKIT.match(text)) and instruction.group(1) != "RUN":
        return _shortened(text)
    text = text.removeprefix("RUN ")
    if match := _BUILD_ARGS.match(text):  # "|3 A=1 B=2 C=3 /bin/sh -c …": the step's build arguments
        text = " ".join(text[match.end() :].split(" ")[int(match.group(1)) :])
    text = _SHELL.sub("", text)
    if copy := _COPY.match(text):
        text = f"{copy.group(1)} … in {copy.group(2)}"
    elif text.startswith("#(nop) "):
        text = text.removeprefix("#(nop) ").strip()
    elif text:
        text = f"RUN {text}"
    return _shortened(text)


def _shortened(text: str) -> str:
    text = re.sub(r"\s+", " ", text) or "(imported base)"
    return text if len(text) <= 90 else text[:87] + "..."


@dataclasses.dataclass(frozen=True)
class SizeReport:
    image: str
    layers: list[Size]
    groups: list[Size]
    distributions: list[Size]
    """The largest Python distributions, for where to look first."""

    @property
    def total(self) -> Size:
        return Size(
            "total",
            sum(layer.bytes for layer in self.layers),
            sum(layer.compressed_bytes for layer in self.layers),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "total": dataclasses.asdict(self.total),
            "layers": [dataclasses.asdict(layer) for layer in self.layers],
            "groups": [dataclasses.asdict(group) for group in self.groups],
            "largest_distributions": [dataclasses.asdict(d) for d in self.distributions],
        }


SMALL_LAYER_BYTES = 1_000_000
"""Layers below 1 MB compressed (copied sources, labels) are shown as one row."""


def build_report(image: str, layers: Iterable[Size], buckets: Mapping[str, Mapping[str, int]]) -> SizeReport:
    return SizeReport(image, list(layers), group_sizes(buckets), largest_distributions(buckets))


# --- adapters -----------------------------------------------------------------------------------------------


def saved_image(image: str, owner_of: OwnerOf | None = None) -> Measured:
    """`docker save` of the image, streamed through the measurement."""
    with subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as save:
        assert save.stdout is not None
        try:
            measured = measure_archive(save.stdout, owner_of)
        except (tarfile.TarError, ValueError) as error:  # SavedArchiveError is a ValueError
            save.kill()
            stderr = save.stderr.read().decode(errors="replace").strip() if save.stderr else ""
            raise ExternalFailure(f"docker save {image}: {stderr or error}") from error
        except BaseException:  # the owners' probe failed, or an interrupt: docker save stops with us
            save.kill()
            raise
        if save.wait() != 0:
            stderr = save.stderr.read().decode(errors="replace").strip() if save.stderr else ""
            raise ExternalFailure(f"docker save {image} failed: {stderr[-400:]}")
    return measured


def probed_owners(image: str) -> OwnerOf:
    """size_probe.py inside the image, offline, with the image's own python3: who owns which file."""
    done = subprocess.run(
        ["docker", "run", "--rm", "-i", "--network", "none", "--entrypoint", "python3", image, "-"],
        input=PROBE.read_text(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ExternalFailure(
            f"asking who owns the files inside {image} failed: {done.stderr.strip()[-400:]}"
        )
    try:
        probed = json.loads(done.stdout)
        files, folders, roots = dict(probed["files"]), dict(probed["folders"]), tuple(probed["roots"])
    except (ValueError, KeyError, TypeError) as error:
        raise ExternalFailure(f"the file owners probed inside {image} are no map ({error})") from error
    return functools.partial(bucket_of, files=files, folders=folders, roots=roots)


def largest_layers(layers: Iterable[Size]) -> list[Size]:
    """Layers by compressed size, largest first, the small ones folded into one row."""
    ordered = sorted(layers, key=lambda s: (-s.compressed_bytes, s.name))
    large = [layer for layer in ordered if layer.compressed_bytes >= SMALL_LAYER_BYTES]
    small = ordered[len(large) :]
    if small:
        large.append(
            Size(
                f"({len(small)} layers under 1 MB)",
                sum(layer.bytes for layer in small),
                sum(layer.compressed_bytes for layer in small),
            )
        )
    return large


def _amount(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 1e8 else f"{size / 1e6:.1f} MB"


def render(report: SizeReport, console: Console) -> None:
    total = report.total
    console.print(
        f"{report.image}: {_amount(total.compressed_bytes)} compressed (as a registry stores it), "
        f"{_amount(total.bytes)} uncompressed, in {len(report.layers)} layers",
        markup=False,
        soft_wrap=True,
    )
    for title, rows in (
        ("by package group", report.groups),
        ("by layer", largest_layers(report.layers)),
        ("largest Python distributions", report.distributions),
    ):
        table = Table(title=title, title_justify="left")
        table.add_column("what", overflow="fold")
        table.add_column("compressed", justify="right")
        table.add_column("uncompressed", justify="right")
        for row in rows:
            table.add_row(safe_text(row.name), _amount(row.compressed_bytes), _amount(row.bytes))
        console.print(table)
