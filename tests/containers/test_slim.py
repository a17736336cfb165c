"""containers/slim.py: what leaves the image after the build (the closure of build requirements that nothing
else installed needs), against dependency graphs shaped like the jax stage's, and for real in a virtualenv.

    JAX_PLATFORMS=cpu python -m pytest -q tests/containers/test_slim.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxbench.containers.slim import Graph, closure, environments, removable

# The jax stage's shape: TransformerEngine builds with cudnn-frontend (which pulls in the CUTLASS DSL for
# CUDA 12 and 13), pybind11 and cmake; jax and numpy are needed at run time; numpy is needed by both.
DEPENDS = {
    "jax": ["jaxlib", "numpy", "ml-dtypes"],
    "jaxlib": ["numpy", "ml-dtypes"],
    "ml-dtypes": ["numpy"],
    "numpy": [],
    "transformer-engine-jax": ["transformer-engine-cu13", "jax", "pydantic", "nvidia-cudnn-frontend"],
    "transformer-engine-cu13": ["pydantic", "importlib-metadata"],
    "pydantic": [],
    "importlib-metadata": [],
    "nvidia-cudnn-frontend": ["nvidia-cutlass-dsl", "numpy"],
    "nvidia-cutlass-dsl": ["nvidia-cutlass-dsl-libs-cu12", "cuda-bindings"],
    "nvidia-cutlass-dsl-libs-cu12": [],
    "nvidia-cutlass-dsl-libs-cu13": [],
    "cuda-bindings": ["cuda-pathfinder"],
    "cuda-pathfinder": [],
    "pybind11": ["pybind11-global"],
    "pybind11-global": [],
    "cmake": [],
    "ninja": [],
    "scipy": ["numpy"],
}
"""The jax stage's shape: TransformerEngine builds with cudnn-frontend (which pulls in the CUTLASS DSL),
pybind11 and cmake, and declares cudnn-frontend as a requirement too; numpy is needed by both sides."""


def graph(depends: dict[str, list[str]], extras: dict[str, dict[str, list[str]]] | None = None) -> Graph:
    """The shape slim's probe prints: distribution -> extra -> [[requirement, [its extras]]]."""
    shaped: Graph = {name: {"": [[r, []] for r in requires]} for name, requires in depends.items()}
    for name, by_extra in (extras or {}).items():
        shaped[name] |= {extra: [[r, []] for r in requires] for extra, requires in by_extra.items()}
    return shaped


GRAPH = graph(DEPENDS, {"nvidia-cutlass-dsl": {"cu13": ["nvidia-cutlass-dsl-libs-cu13"]}})
TE = frozenset({("transformer-engine-jax", "nvidia-cudnn-frontend")})
BUILD = {name: set() for name in ("nvidia-cudnn-frontend", "pybind11", "cmake", "ninja", "setuptools")}


def test_build_requirements_and_what_only_they_needed_go() -> None:
    build = BUILD | {"nvidia-cudnn-frontend": set()}
    assert removable(build, GRAPH, cut=TE) == {
        "nvidia-cudnn-frontend",
        "nvidia-cutlass-dsl",
        "nvidia-cutlass-dsl-libs-cu12",
        "cuda-bindings",
        "cuda-pathfinder",
        "pybind11",
        "pybind11-global",
        "cmake",
        "ninja",
    }


def test_the_extras_of_build_requirements_go_too() -> None:
    """pybind11[global] brought pybind11-global, which nothing else needs."""
    shaped = GRAPH | graph({"pybind11": []}, {"pybind11": {"global": ["pybind11-global"]}})
    assert "pybind11-global" in removable({"pybind11": {"global"}}, shaped)
    assert "pybind11-global" not in removable({"pybind11": set()}, shaped)  # not brought by the build


def test_a_declared_requirement_stays_unless_cut_as_build_only() -> None:
    build = BUILD | {"nvidia-cudnn-frontend": set()}
    assert "nvidia-cudnn-frontend" not in removable(build, GRAPH)  # TE requires it
    assert "nvidia-cudnn-frontend" in removable(build, GRAPH, cut=TE)


def test_what_a_runtime_package_also_needs_stays() -> None:
    shaped = GRAPH | graph({"jax-cuda13-plugin": ["cuda-bindings"]})
    gone = removable(BUILD | {"nvidia-cudnn-frontend": set()}, shaped, cut=TE)
    assert "cuda-bindings" not in gone and "cuda-pathfinder" not in gone  # the plugin needs them
    assert "numpy" not in gone  # cudnn-frontend and jax share it
    assert "nvidia-cutlass-dsl" in gone


def test_a_build_requirement_something_else_requires_stays() -> None:
    assert "cmake" not in removable(BUILD, GRAPH | graph({"some-tool": ["cmake"]}))


def test_extras_are_followed_only_where_asked() -> None:
    """The plugin's `with-cuda` extra brings the CUDA wheels; a `dev` extra nobody asks for brings nothing."""
    shaped = GRAPH | graph(
        {"jax-cuda13-plugin": [], "nvidia-nccl": [], "scipy": ["numpy"]},
        {"jax-cuda13-plugin": {"with-cuda": ["nvidia-nccl"]}, "scipy": {"dev": ["ninja", "cmake"]}},
    )
    assert {"ninja", "cmake"} <= removable(BUILD | {"nvidia-nccl": set()}, shaped)  # dev: never asked for
    kept = removable(BUILD | {"nvidia-nccl": set()}, shaped, asked={"jax-cuda13-plugin": {"with-cuda"}})
    assert "nvidia-nccl" not in kept


def test_closure_ignores_what_is_not_installed_and_cycles() -> None:
    shaped = graph({"a": ["b", "missing"], "b": ["a"]})
    assert closure({"a": set(), "not-installed": set()}, shaped) == {"a", "b"}


def test_what_a_stage_asked_for_by_name_stays() -> None:
    """A stage that installs a build requirement's dependency by name (scipy here) keeps it."""
    shaped = GRAPH | graph({"cmake": ["scipy"]})
    assert "scipy" in removable(BUILD, shaped)
    assert "scipy" not in removable(BUILD, shaped, asked={"scipy": set()})


def test_stage_records_are_read_per_environment(tmp_path: Path) -> None:
    records = tmp_path / "stages"
    records.mkdir()
    te = {
        "python": "/opt/venv/bin/python",
        "build_requires": ["pybind11[global]", "cmake>=3.21"],
        "build_only": ["nvidia-cudnn-frontend"],
        "requirements": ["transformer-engine-jax==2.18"],
        "distribution": "transformer-engine-jax",
    }
    jax = {"python": "/opt/venv/bin/python", "requirements": ["jax-cuda13-plugin[with-cuda]==0.12"]}
    pax = {"python": "/opt/pax/venv/bin/python", "requirements": ["paxml==1.4.0"]}
    (records / "01-jax.json").write_text(json.dumps({"components": {"te": te, "jax": jax}}))
    (records / "02-pax.json").write_text(json.dumps({"components": {"paxml": pax}}))
    found = environments(records)
    venv = found["/opt/venv/bin/python"]
    assert venv.build == {"pybind11": {"global"}, "cmake": set(), "nvidia-cudnn-frontend": set()}
    assert venv.cut == {("transformer-engine-jax", "nvidia-cudnn-frontend")}
    assert venv.asked["jax-cuda13-plugin"] == {"with-cuda"}
    assert found["/opt/pax/venv/bin/python"].build == {}


def _installed(site: Path, name: str, requires: list[str]) -> None:
    """A distribution as pip leaves it in site-packages: its module, a dist-info with METADATA and RECORD."""
    (site / f"{name}.py").write_text("")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    (info / "INSTALLER").write_text("pip\n")
    files = [f"{name}.py", f"{info.name}/METADATA", f"{info.name}/INSTALLER", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


@pytest.mark.slow
def test_slim_uninstalls_and_sweeps_for_real(tmp_path: Path) -> None:
    """A virtualenv where a build requirement (builder) pulled in a helper, and a runtime package (runtime)
    that needs a shared one: slim uninstalls builder and helper with pip, keeps runtime and shared, removes
    the static library and the source checkouts, and says so."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = next((venv / "lib").glob("python3*/site-packages"))
    _installed(site, "builder", ["helper", "shared"])
    _installed(site, "helper", [])
    _installed(site, "shared", [])
    _installed(site, "runtime", ["shared", "extra-thing; extra == 'never'"])
    (site / "libthing.a").write_bytes(b"!<arch>\n")
    (site / "runtime_pkg" / "tests" / "data").mkdir(parents=True)
    (site / "runtime_pkg" / "tests" / "data" / "case.npy").write_bytes(b"x" * 100)
    (site / "runtime_pkg" / "testing.py").write_text("")  # an API module, not a test suite
    (site / "libthing.so").write_bytes(b"\x7fELF")
    sources = tmp_path / "src"
    (sources / "jax").mkdir(parents=True)
    (sources / "jax" / "setup.py").write_text("")
    records = tmp_path / "stages"
    records.mkdir()
    component = {"python": python, "build_requires": ["builder>=1"]}
    (records / "01-x.json").write_text(json.dumps({"components": {"x": component}}))

    done = subprocess.run(
        [
            python,
            str(Path("containers/slim.py").resolve()),
            "--records",
            str(records),
            "--root",
            str(venv),
            "--sources",
            str(sources),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "build requirements out: builder helper" in done.stdout, done.stdout
    assert {p.name for p in site.glob("*.py")} == {"runtime.py", "shared.py"}
    assert not (site / "libthing.a").exists() and (site / "libthing.so").exists()
    assert not (site / "runtime_pkg" / "tests").exists() and (site / "runtime_pkg" / "testing.py").exists()
    assert not sources.exists()
