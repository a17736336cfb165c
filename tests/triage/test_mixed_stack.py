"""A triage stack with both kinds of move (triage/bench.py: Benchmark.stack): one component at a commit of its
repository (an overlay built from source) and another at a published release (a wheel overlay in front of
it). A process inside the stack imports each at its pin, and the manifest its runs record names both.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_mixed_stack.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optax
import pytest

from jaxbench.harness.provenance.collection import read_image_info
from jaxbench.triage.bench import Benchmark
from jaxbench.triage.commands import releases_here
from jaxbench.triage.stacks import Move
from tests.containers.test_overlay import BASE, commit_version, git
from tests.support.wheels import package_wheel

pytestmark = pytest.mark.slow

CONFIG = {"family": "llama2", "size": "tiny"}
OPTAX = "https://github.com/google-deepmind/optax.git"


def test_a_stack_of_a_commit_and_a_release_imports_both_and_records_both(tmp_path: Path) -> None:
    repo = tmp_path / "tinypkg"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    first, second = commit_version(repo, "1.0"), commit_version(repo, "2.0")
    wheelhouse = tmp_path / "wheels"
    for version in ("0.2.97", "0.2.98"):
        project = tmp_path / f"optax-{version}"
        package_wheel(Path(optax.__file__).parent, "optax", version, project, wheelhouse)
    moves = {
        "tinypkg": Move("tinypkg", str(repo), first, second),
        "optax": Move("optax", OPTAX, "0.2.97", "0.2.98", by="release"),
    }
    benchmark = Benchmark(
        tmp_path / "work", config=CONFIG, config_hash=None, moves=moves, base_manifest=BASE,
        releases=releases_here(str(wheelhouse)),
    )  # fmt: skip

    environ = benchmark.stack({"tinypkg": second, "optax": "0.2.98"})

    code = (
        "import importlib.metadata as m, tinypkg, optax; "
        "print(m.version('tinypkg'), tinypkg.VALUE, m.version('optax'), optax.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=os.environ | environ, check=True, capture_output=True, text=True
    )
    tinypkg_version, value, optax_version, optax_file = done.stdout.split()
    assert (tinypkg_version, value, optax_version) == ("2.0", "2.0", "0.2.98")
    assert optax_file.startswith(str(tmp_path / "work" / "stacks"))  # the wheel's, not the harness's optax
    # The wheels go in front of the commit overlay on the path, which goes in front of the harness's.
    wheels, overlay = environ["PYTHONPATH"].split(os.pathsep)[:2]
    assert wheels.endswith("-wheels/site") and overlay.endswith("/site") and overlay != wheels
    manifest = read_image_info(environ).manifest
    assert manifest is not None
    components = manifest["components"]
    assert (components["tinypkg"]["commit"], components["tinypkg"]["stage"]) == (second, "overlay")
    assert (components["optax"]["version"], components["optax"]["stage"]) == ("0.2.98", "wheels")
    assert components["jax"] == BASE["components"]["jax"]  # what did not move is the harness's own
