"""Install one build stage's components inside an image, as its plan (written by `jaxbench build` from the
manifest) says, and record what was installed.

Runs inside the image with nothing but the standard library and pip (the harness is not installed yet), so
it cannot share code with the host side. Installs are constrained to every earlier stage's versions, so a
later stage cannot silently replace a pin; source installs clone, patch and build the pinned commit. How,
and what the record holds: docs/design.md, "Installing a stage".

    python3 install_stage.py PLAN.json [--python /opt/venv/bin/python]
    python3 install_stage.py --print-constraints       # for the harness stage
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path("/opt/jaxbench")
SOURCES = Path("/opt/src")
DEFAULT_CAPABILITIES = "sm_80,sm_90,sm_100"
"""Ampere, Hopper, Blackwell: jaxlib's and TransformerEngine's targets unless CUDA_COMPUTE_CAPABILITIES."""
GIT = [
    "git",
    "-c",
    "user.name=jaxbench",
    "-c",
    "user.email=jaxbench@localhost",
    "-c",
    "advice.detachedHead=false",
]


def run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=cwd, check=True, env=env)


def pip(python: str, args: list[str], env: dict[str, str] | None = None) -> None:
    run([python, "-m", "pip", "install", "--no-cache-dir", "--progress-bar", "off", *args], env=env)


def installed_versions(python: str) -> dict[str, str]:
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True
    ).stdout
    return {normalize(p["name"]): p["version"] for p in json.loads(listed)}


def normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirement_name(requirement: str) -> str:
    name = requirement
    for stop in "[=<>!~; @":
        name = name.split(stop)[0]
    return normalize(name.strip())


def earlier_constraints(records_dir: Path, python: str) -> list[str]:
    """`name==version` of every component distribution installed by an earlier stage into this Python."""
    lines = []
    for record in sorted(records_dir.glob("*.json")):
        for component in json.loads(record.read_text())["components"].values():
            if (
                component.get("python") == python
                and component.get("distribution")
                and component.get("version")
            ):
                lines.append(f"{component['distribution']}=={component['version']}")
    return lines


def checkout(name: str, component: dict[str, Any], patches_dir: Path) -> Path:
    target = SOURCES / name
    if target.exists():
        shutil.rmtree(target)
    run([*GIT, "init", "--quiet", str(target)])
    run(
        [
            *GIT,
            "-C",
            str(target),
            "fetch",
            "--quiet",
            "--depth=1",
            "--",  # a repository value starting with "-" is then a repository, never an option
            component["repository"],
            component["commit"],
        ]
    )
    run([*GIT, "-C", str(target), "checkout", "--quiet", "FETCH_HEAD"])
    for patch in component["patches"]:
        if "pull" in patch:
            # A merge needs the history between the pin and the pull request: deepen until git finds a base.
            run([*GIT, "-C", str(target), "fetch", "--quiet", "--unshallow", "--", component["repository"]])
            run(
                [
                    *GIT,
                    "-C",
                    str(target),
                    "fetch",
                    "--quiet",
                    "--",
                    component["repository"],
                    f"refs/pull/{patch['pull']}/head",
                ]
            )
            run([*GIT, "-C", str(target), "merge", "--no-edit", "--quiet", "FETCH_HEAD"])
        else:
            run([*GIT, "-C", str(target), "apply", str(patches_dir / patch["file"])])
    return target


EXTRA_REQUIREMENTS = """
import importlib.metadata, json, sys
from pip._vendor.packaging.requirements import Requirement
distribution, extra = sys.argv[1:]
found = []
for line in importlib.metadata.requires(distribution) or []:
    requirement = Requirement(line)
    marker = requirement.marker
    if marker is not None and marker.evaluate({"extra": extra}) and not marker.evaluate({"extra": ""}):
        requirement.marker = None
        found.append(str(requirement))
print(json.dumps(found))
"""
"""Run by the target Python: the requirements its installed `distribution` declares only under `extra`
(markers evaluated for this interpreter and platform). pip's vendored `packaging` reads the markers: the
image has nothing else to parse them with at this point."""


def extra_requirements(python: str, distribution: str, extra: str, exclude: list[str]) -> list[str]:
    listed = subprocess.run(
        [python, "-c", EXTRA_REQUIREMENTS, distribution, extra], check=True, capture_output=True, text=True
    ).stdout
    return [
        r
        for r in json.loads(listed)
        if not any(fnmatch.fnmatchcase(requirement_name(r), normalize(pattern)) for pattern in exclude)
    ]


def has_cuda_toolkit() -> bool:
    """A base image with a CUDA toolkit (nvidia/cuda devel): nvcc on PATH or /usr/local/cuda."""
    return shutil.which("nvcc") is not None or Path("/usr/local/cuda").is_dir()


def site_packages(python: str) -> Path:
    return Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )


def compile_env(
    accelerator: str, pip_cuda: Path | None, link_dir: Path, environ: dict[str, str]
) -> dict[str, str]:
    """The environment of builds that compile against CUDA (TransformerEngine).

    `pip_cuda`: the site-packages whose nvidia/* wheels are the CUDA to compile against, when the base has
    no toolkit (a plain Ubuntu base: the flavor's CUDA comes from the wheels jax installs). Their headers
    are in nvidia/*/include, where TransformerEngine looks by itself, but they ship only versioned libraries
    (libnccl.so.2): the linker gets unversioned names for them in `link_dir`, on LIBRARY_PATH. The built
    extension records the sonames, so nothing needs the links afterwards.
    """
    env = dict(environ)
    if accelerator != "cuda":
        return env
    # TransformerEngine otherwise asks nvcc, which a pip CUDA lacks; the same targets as jaxlib's.
    capabilities = env.get("CUDA_COMPUTE_CAPABILITIES", DEFAULT_CAPABILITIES)
    env.setdefault(
        "NVTE_CUDA_ARCHS", ";".join(c.strip().removeprefix("sm_") for c in capabilities.split(","))
    )
    if pip_cuda is None:
        return env
    for library in sorted(pip_cuda.glob("nvidia/*/lib/lib*.so.*")):
        link = link_dir / (library.name.split(".so.")[0] + ".so")
        if not link.exists():
            link.symlink_to(library)
    env["LIBRARY_PATH"] = os.pathsep.join(p for p in (str(link_dir), env.get("LIBRARY_PATH", "")) if p)
    return env


def build_jaxlib(jax_dir: Path, xla_dir: Path | None, accelerator: str, python: str) -> None:
    wheels = "jaxlib,jax-cuda-plugin,jax-cuda-pjrt" if accelerator == "cuda" else "jaxlib"
    argv = [python, "build/build.py", "build", f"--wheels={wheels}", "--output_path=dist"]
    if xla_dir is not None:
        argv.append(f"--local_xla_path={xla_dir}")
    if accelerator == "cuda":
        capabilities = os.environ.get("CUDA_COMPUTE_CAPABILITIES", DEFAULT_CAPABILITIES)
        argv.append(f"--cuda_compute_capabilities={capabilities}")
    run(argv, cwd=jax_dir)
    pip(python, sorted(str(w) for w in (jax_dir / "dist").glob("*.whl")))
    pip(python, [str(jax_dir)])
    shutil.rmtree(Path.home() / ".cache" / "bazel", ignore_errors=True)


def check_wheel_commit(name: str, component: dict[str, Any], python: str) -> str | None:
    """The commit the installed wheel says it was built from (jax records it), which must be the pinned
    one; with no pin yet (a release taken from the package index), it becomes the recorded commit."""
    where = component.get("wheel_commit")
    if not where:
        return component["commit"]
    module, _, attribute = where.rpartition(".")
    code = f"import importlib; print(getattr(importlib.import_module({module!r}), {attribute!r}))"
    built_from = subprocess.run(
        [python, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    if component["commit"] is not None and built_from != component["commit"]:
        sys.exit(
            f"{name}: the installed wheel says it was built from {built_from} ({where}), "
            f"but the manifest pins {component['commit']}"
        )
    return built_from


def install(plan: dict[str, Any], python: str, patches_dir: Path, records_dir: Path) -> dict[str, Any]:
    components: dict[str, dict[str, Any]] = plan["components"]
    constraints = earlier_constraints(records_dir, python)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write("".join(f"{line}\n" for line in constraints))
    constrained = ["-c", handle.name]

    # Components with build requirements compile against this environment, so they go in after the rest.
    in_place = [n for n, c in components.items() if c["build_requires"]]
    requirements = [
        r
        for n, c in components.items()
        if (c["install"] != "source" or c["no_deps"]) and n not in in_place
        for r in c["requirements"]
    ]
    requirements += [r for c in components.values() for r in c["build_requires"]]
    if requirements:
        pip(python, [*constrained, *requirements])
    checkouts: dict[str, Path] = {}
    with tempfile.TemporaryDirectory() as links:
        env = dict(os.environ)
        if in_place:  # only what compiles in place needs to know where CUDA is
            pip_cuda = None if has_cuda_toolkit() else site_packages(python)
            env = compile_env(plan["accelerator"], pip_cuda, Path(links), env)
        for name in in_place:
            component = components[name]
            if component["install"] != "source":
                pip(python, [*constrained, "--no-build-isolation", *component["requirements"]], env=env)
        # Checkouts that jax's build compiles in (XLA) first, whatever the stage's order.
        for name, component in sorted(components.items(), key=lambda item: item[1]["build"] != "with-jax"):
            if component["install"] != "source":
                continue
            checkouts[name] = checkout(name, component, patches_dir)
            if component["build"] == "with-jax":
                continue
            if component["build"] == "jaxlib":
                xla = next(
                    (
                        checkouts[n]
                        for n, c in components.items()
                        if c["build"] == "with-jax" and n in checkouts
                    ),
                    None,
                )
                build_jaxlib(checkouts[name], xla, plan["accelerator"], python)
                continue
            project = checkouts[name] / (component["subdirectory"] or "")
            flags = [
                *(["--no-deps"] if component["no_deps"] else []),
                *(["--no-build-isolation"] if name in in_place else []),
            ]
            pip(python, [*constrained, *flags, str(project)], env=env)
    versions = installed_versions(python)
    for name, component in components.items():
        wanted = component["extra_requires"]
        if not wanted:
            continue
        distribution = distribution_of(name, component, versions)
        if distribution is None:
            raise SystemExit(f"{name}: extra_requires, but no installed distribution stands for it")
        extras = extra_requirements(python, distribution, wanted["extra"], wanted["exclude"])
        print(f"{name}: {len(extras)} requirements of its extra {wanted['extra']}", flush=True)
        if extras:
            pip(python, [*constrained, *extras])
            versions = installed_versions(python)
    os.unlink(handle.name)

    record: dict[str, Any] = {"stage": plan["stage"], "components": {}}
    for name, component in components.items():
        distribution = distribution_of(name, component, versions)
        commit = (
            check_wheel_commit(name, component, python)
            if component["install"] != "source"
            else component["commit"]
        )
        record["components"][name] = {
            **component,
            "commit": commit,
            "python": python,
            "distribution": distribution,
            "version": versions.get(distribution) if distribution else component.get("version"),
        }
    return record


def distribution_of(name: str, component: dict[str, Any], versions: dict[str, str]) -> str | None:
    """The pip distribution that stands for the component: its first requirement, else its own name."""
    if component["build"] == "with-jax":
        return None
    candidates = (
        [requirement_name(component["requirements"][0])]
        if component["requirements"] and not component["no_deps"]
        else []
    )
    candidates.append(normalize(name))
    return next((c for c in candidates if c in versions), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, nargs="?")
    parser.add_argument("--python", default=sys.executable, help="the environment to install into")
    parser.add_argument("--patches", type=Path, default=ROOT / "patches")
    parser.add_argument("--records", type=Path, default=ROOT / "stages")
    parser.add_argument(
        "--print-constraints",
        action="store_true",
        help="print the installed components of earlier stages (this Python) as pip constraints, and exit",
    )
    args = parser.parse_args()
    if args.print_constraints:
        print("\n".join(earlier_constraints(args.records, args.python)))
        return 0
    if args.plan is None:
        parser.error("a PLAN.json is needed")
    plan = json.loads(args.plan.read_text())
    args.records.mkdir(parents=True, exist_ok=True)
    record = install(plan, args.python, args.patches, args.records)
    (args.records / f"{plan['index']:02d}-{plan['stage']}.json").write_text(
        json.dumps(record, indent=2, sort_keys=True) + "\n"
    )
    print(
        f"stage {plan['stage']}: "
        + ", ".join(
            f"{n} {c['version'] or (c['commit'] or 'unknown')[:12]}" for n, c in record["components"].items()
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
