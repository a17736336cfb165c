"""A stack without an image: the harness's virtualenv with some pure-Python components overlaid at other
commits, each installed from its git repository into one folder that goes in front on `PYTHONPATH`.

Triage and the local nightly probe a component (optax) at commits that no image was built for: an overlay
takes seconds where an image takes minutes. Beside `site/` it writes the resolved manifest the virtualenv
records (containers/record.py), with the overlaid components' entries replaced, so that every result run
inside it names the commit that ran (harness/provenance/collection.py reads it through JAXBENCH_MANIFEST).

    jaxbench overlay --manifest /tmp/jaxbench-nightly-local/manifest.yaml --components optax --out /tmp/ov
    env PYTHONPATH=/tmp/ov/site JAXBENCH_MANIFEST=/tmp/ov/manifest.yaml jaxbench run llama2 --size tiny
    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_overlay.py
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import Distribution, distributions
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jaxbench.containers import record
from jaxbench.containers.install_stage import normalize
from jaxbench.core.errors import InvalidInput, RunFailed
from jaxbench.core.processes import run_child
from jaxbench.core.urls import scrub_document, scrub_url, scrub_urls
from jaxbench.harness.provenance.collection import MANIFEST_ENV, OVERLAY_KIND

SITE = "site"
MANIFEST_FILE = "manifest.yaml"
PINS_FILE = "pins.json"
"""What the overlay was made from: a later call with the same pins reuses the folder."""
STAGE = "overlay"
PIP_TIMEOUT_S = 900.0
"""Cloning and building one pure-Python component; a hung git or pip must not stall a nightly forever."""
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_URL_SCHEMES = ("file", "http", "https", "ssh", "git")

PipInstallRunner = Callable[[list[str]], None]
"""Runs one `pip install` of a pin into the overlay to its end (run_pip)."""


@dataclass(frozen=True)
class Pin:
    repository: str = field(repr=False)
    """A clone URL or a local path (made a file:// URL for pip), as pip must see it: credentials and all.
    Whatever is written or shown of it goes through `scrub_url` (the overlay's manifest and pins)."""
    commit: str
    """The full 40-hex-digit commit to install."""


@dataclass(frozen=True)
class Overlay:
    path: Path
    pins: Mapping[str, Pin]
    reused: bool = False
    """True when the folder already held these pins and nothing was installed."""

    @property
    def site(self) -> Path:
        return self.path / SITE

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST_FILE

    def environ(self) -> dict[str, str]:
        """What a run inside the overlay adds to its environment."""
        return {"PYTHONPATH": str(self.site), MANIFEST_ENV: str(self.manifest)}


# --- pure: checking pins, the pip command, the manifest -----------------------------------------------------


def repository_url(repository: str) -> str:
    """A URL pip's `git+` can clone: URLs as given, a local path as a file:// URL of its absolute path."""
    if urlsplit(repository).scheme in _URL_SCHEMES:
        return repository
    return Path(repository).resolve().as_uri()


def check_pins(pins: Mapping[str, Pin]) -> None:
    """Refuse, naming the field, what pip would fail on later or install wrongly."""
    if not pins:
        raise InvalidInput("overlay: no components to overlay")
    for name, pin in pins.items():
        if not pin.repository or pin.repository.startswith("-"):
            raise InvalidInput(f"components.{name}.repository: expected a clone URL or a local path")
        scheme = urlsplit(pin.repository).scheme
        if scheme not in _URL_SCHEMES and not Path(pin.repository).is_dir():
            raise InvalidInput(f"components.{name}.repository: {scrub_url(pin.repository)}: no such folder")
        if scheme == "file" and not Path(urlsplit(pin.repository).path).is_dir():
            raise InvalidInput(f"components.{name}.repository: {scrub_url(pin.repository)}: no such folder")
        if not _COMMIT.match(pin.commit or ""):
            raise InvalidInput(
                f"components.{name}.commit: expected a full 40-hex-digit commit, got {pin.commit!r}"
            )


def manifest_pins(components: Mapping[str, Any], names: Sequence[str], source: str) -> dict[str, Pin]:
    """Each named component's repository and commit, from a pin manifest's `components` (containers/
    manifest.py's typed ones, whose `clone_url` keeps the credentials git needs, or plain mappings)."""
    if not names:
        raise InvalidInput("--components: expected one or more component names")
    pins = {}
    for name in names:
        if name not in components:
            known = ", ".join(sorted(components))
            raise InvalidInput(f"{source}: components.{name}: no such component (the manifest has {known})")
        component = components[name]
        if isinstance(component, Mapping):
            pins[name] = Pin(str(component.get("repository") or ""), str(component.get("commit") or ""))
        else:
            pins[name] = Pin(component.clone_url, component.commit)
    return pins


def pip_command(python: str, pin: Pin, site: Path) -> list[str]:
    """Install one component at its commit into `site`, alone: its dependencies are the virtualenv's, and
    its build backend too (no network)."""
    return [
        python,
        *("-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"),
        *("--no-deps", "--no-build-isolation", "--target", str(site)),
        f"git+{repository_url(pin.repository)}@{pin.commit}",
    ]


def pins_document(pins: Mapping[str, Pin]) -> dict[str, Any]:
    return {
        "pins": {
            name: {"repository": scrub_url(repository_url(pin.repository)), "commit": pin.commit}
            for name, pin in sorted(pins.items())
        }
    }


def overlay_entry(pin: Pin, commit: str, version: str) -> dict[str, Any]:
    """A component's entry in the overlay's manifest, in the shape containers/record.py writes."""
    component: dict[str, Any] = {
        "repository": pin.repository,
        "ref": None,
        "commit": commit,
        "version": version,
        "install": "source",
        "release_tag": None,
        "patches": [],
    }
    return record.component_entry(component, STAGE)


def overlay_manifest(base: Mapping[str, Any] | None, entries: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The base manifest with the overlaid components' entries replaced (in place; new ones at the end),
    every URL without credentials (a base recorded by an older jaxbench may hold one)."""
    header = {k: v for k, v in (base or {}).items() if k not in ("schema_version", "components")}
    components = dict((base or {}).get("components") or {})
    merged = {name: entries.get(name, entry) for name, entry in components.items()}
    merged |= {name: entry for name, entry in entries.items() if name not in components}
    return scrub_document(
        record.resolved_manifest(header | {"kind": OVERLAY_KIND}, []) | {"components": merged}
    )


def overlay_packages(base: Sequence[str], installed: Mapping[str, str]) -> list[str]:
    """The base `name==version` list with the overlaid distributions' versions."""
    overlaid = {normalize(name) for name in installed}
    kept = [line for line in base if normalize(line.split("==")[0]) not in overlaid]
    return kept + [f"{name}=={version}" for name, version in installed.items()]


# --- the folder and pip -------------------------------------------------------------------------------------


def run_pip(argv: list[str], env: Mapping[str, str] | None = None, what: str | None = None) -> None:
    """pip, quietly (in `env`, by default this process's); a failure names what it installed (`what`, by
    default the last argument) and ends with the last lines pip printed."""
    done = run_child(argv, env=env, capture=True, timeout_s=PIP_TIMEOUT_S)
    if done.returncode != 0:
        tail = " | ".join(line.strip() for line in done.stderr.strip().splitlines()[-6:])
        what = what or argv[-1]
        raise RunFailed(scrub_urls(f"pip install {what} exited with status {done.returncode}: {tail}"))


def made_from(out: Path, document: Mapping[str, Any]) -> bool:
    """Whether `out` holds a whole overlay made from the pins `document` describes."""
    try:
        recorded = json.loads((out / PINS_FILE).read_text())
    except (OSError, ValueError):
        return False
    return bool(recorded == document and (out / MANIFEST_FILE).is_file())


def existing(out: Path, pins: Mapping[str, Pin]) -> Overlay | None:
    """The overlay already in `out`, if it was made from exactly these pins."""
    return Overlay(out, dict(pins), reused=True) if made_from(out, pins_document(pins)) else None


def _new_distributions(site: Path, before: set[str]) -> list[Distribution]:
    return [
        d for d in distributions(path=[str(site)]) if d.metadata["Name"] and d.metadata["Name"] not in before
    ]


def _installed_commit(distribution: Distribution, pinned: str) -> str:
    """The commit pip checked out, from the distribution's direct_url.json (PEP 610)."""
    try:
        direct = json.loads(distribution.read_text("direct_url.json") or "{}")
    except ValueError:
        return pinned
    return str(direct.get("vcs_info", {}).get("commit_id") or pinned)


def _install(
    pins: Mapping[str, Pin], site: Path, python: str, run: PipInstallRunner
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each pin into `site`: the manifest entries and the `name: version` of what was installed."""
    entries: dict[str, dict[str, Any]] = {}
    installed: dict[str, str] = {}
    for name, pin in pins.items():
        run(pip_command(python, pin, site))
        new = _new_distributions(site, set(installed))
        if not new:
            raise RunFailed(
                f"components.{name}: pip installed no distribution from {scrub_url(pin.repository)}"
            )
        dist = next((d for d in new if normalize(d.metadata["Name"]) == normalize(name)), new[0])
        entries[name] = overlay_entry(pin, _installed_commit(dist, pin.commit), dist.version)
        installed |= {d.metadata["Name"]: d.version for d in new}
    return entries, installed


def replace_folder(out: Path, built: Path) -> None:
    """Move `built` to `out`, replacing an earlier overlay there."""
    if out.exists():
        old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-"))
        out.rename(old / out.name)
        built.rename(out)
        shutil.rmtree(old)
    else:
        built.rename(out)


def create_overlay(
    pins: Mapping[str, Pin],
    out: Path,
    *,
    base_manifest: Mapping[str, Any] | None,
    base_packages: Sequence[str] = (),
    python: str = sys.executable,
    run: PipInstallRunner = run_pip,
) -> Overlay:
    """Install `pins` into `out/site` and write the overlay's manifest and package list beside it. Built in a
    temporary sibling folder and renamed into place, so `out` is whole or absent; reused as it is when it
    already holds exactly these pins."""
    check_pins(pins)
    out = out.absolute()
    if reused := existing(out, pins):
        return reused
    if out.exists() and not (out / PINS_FILE).is_file() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidInput(f"--out {out}: exists and is not an overlay; expected a new or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.new-"))
    building.chmod(0o755)  # mkdtemp's 0700 would hide the overlay from a container's other user
    try:
        entries, installed = _install(pins, building / SITE, python, run)
        manifest = overlay_manifest(base_manifest, entries)
        record.write(manifest, overlay_packages(base_packages, installed), building / MANIFEST_FILE)
        (building / PINS_FILE).write_text(json.dumps(pins_document(pins), indent=2) + "\n")
        replace_folder(out, building)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return Overlay(out, dict(pins))
