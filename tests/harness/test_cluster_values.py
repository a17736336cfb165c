"""Values that enter a SLURM batch script or a Kubernetes manifest are quoted as their readers read them, or
refused, naming the flag, before anything is written or submitted: paths in #SBATCH lines (read here as
sbatch reads them), whole-string patterns for --partition, --account and --time (a trailing line break
is no name), limits within what SLURM and the Kubernetes API hold, namespaces as DNS-1123 labels, images
by the OCI reference grammar. A dry run writes nothing."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from jaxbench.containers.launch import ImageLauncher
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.launch import COUNT_LIMIT, TIME_LIMIT_MINUTES, ClusterRequest, LaunchOptions
from jaxbench.harness.launch.k8s import K8sLauncher
from jaxbench.harness.launch.slurm import SlurmLauncher
from jaxbench.harness.launch.slurm_job import sbatch_script
from jaxbench.harness.runtime.options import RunOptions


def sbatch_arguments(line: str) -> list[str]:
    """The arguments sbatch reads from one `#SBATCH` line, as src/sbatch/opt.c (_get_argument) splits it:
    blanks separate; single or double quotes group and are dropped; a backslash takes the next character
    as it is; an unquoted '#' starts a comment."""
    arguments: list[str] = []
    text, index = line.removeprefix("#SBATCH"), 0
    while index < len(text):
        while index < len(text) and text[index].isspace():
            index += 1
        word: list[str] | None = None
        quote = ""
        while index < len(text) and (quote or not text[index].isspace()):
            char = text[index]
            index += 1
            if char == "\\" and index < len(text):
                word, index = [*(word or []), text[index]], index + 1
            elif quote and char == quote:
                quote, word = "", word or []
            elif not quote and char in "\"'":
                quote, word = char, word or []
            elif not quote and char == "#":
                return arguments + ([] if word is None else ["".join(word)])
            else:
                word = [*(word or []), char]
        assert not quote, f"sbatch refuses an unmatched quote: {line!r}"
        if word is not None:
            arguments.append("".join(word))
    return arguments


def directives(script: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH"):
            (argument,) = sbatch_arguments(line)
            name, _, value = argument.partition("=")
            found[name] = value
    return found


def test_the_reader_of_sbatch_lines_reads_as_sbatch_does() -> None:
    assert sbatch_arguments('#SBATCH --output="/a b/c" # note') == ["--output=/a b/c"]
    assert sbatch_arguments(r"#SBATCH --job-name=a\ b 'c d'") == ["--job-name=a b", "c d"]


@pytest.mark.parametrize("name", ["with space", 'a "quoted" name', "it's", "100%done", "hash#tag"])
def test_paths_in_sbatch_lines_reach_sbatch_as_they_are(tmp_path: Path, name: str) -> None:
    """`#SBATCH --output=` was written unquoted: a space cut the path, a '#' started a comment, '%j'
    became the job id."""
    folder = tmp_path / name / "slurm-llama2-20261127T120000"
    script = sbatch_script(
        ClusterRequest(), job_name=f"jaxbench-{name}", folder=folder, command=["jaxbench", "run", "x"]
    )
    read = directives(script)
    assert read["--output"] == str(folder).replace("%", "%%") + "/job.log"
    assert read["--job-name"] == f"jaxbench-{name}"
    srun = shlex.split(next(line for line in script.splitlines() if line.startswith("srun ")))
    assert f"--output={str(folder).replace('%', '%%')}/rank-%t.log" in srun


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("x\n#SBATCH --evil", r"holds '\\n', which an #SBATCH line cannot hold"),
        ("x\ry", r"holds '\\r', which an #SBATCH line cannot hold"),
        ("hetjob-results", "holds 'hetjob', which sbatch reads as the start of another job"),
        ("PackJob", "holds 'packjob', which sbatch reads as the start of another job"),
        ("back\\slash", "holds a backslash, which turns off SLURM's %t"),
    ],
    ids=["newline", "carriage-return", "hetjob", "packjob", "backslash"],
)
def test_an_out_folder_no_sbatch_line_can_hold_is_refused_and_nothing_is_made(
    tmp_path: Path, out: str, expected: str
) -> None:
    """A line break in --out injected a line (`#SBATCH --evil`) into the batch script."""
    for dry_run in (True, False):
        launcher = SlurmLauncher(LaunchOptions("slurm", dry_run=dry_run), commands=_NoSlurm())
        with pytest.raises(InvalidInput, match=r"^the job's folder \(--out, then slurm-") as refused:
            launcher.launch(RunOptions("llama2", out_dir=tmp_path / out), Console(quiet=True))
        assert re.search(expected, str(refused.value))
        assert list(tmp_path.iterdir()) == []


def test_an_image_job_refuses_paths_pyxis_cannot_mount(tmp_path: Path) -> None:
    options = LaunchOptions("slurm", image="ghcr.io/jaxbench/jax:cuda", dry_run=True)
    with pytest.raises(InvalidInput, match=r"pyxis's --container-mounts separates mounts with ','"):
        SlurmLauncher(options).launch(RunOptions("llama2", out_dir=tmp_path / "a,b"), Console(quiet=True))


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: SlurmLauncher(LaunchOptions("slurm", dry_run=True)),
        lambda tmp: K8sLauncher(LaunchOptions("k8s", image="ghcr.io/jaxbench/jax:cuda", dry_run=True)),
    ],
    ids=["slurm", "k8s"],
)
def test_a_dry_run_makes_no_folder(tmp_path: Path, make: Any) -> None:
    """`--dry-run` made the --out folders it only prints a job for."""
    out = tmp_path / "new" / "runs"
    launched = make(tmp_path).launch(RunOptions("llama2", steps=20, out_dir=out), Console(quiet=True))
    assert launched.exit_code == ExitCode.OK and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        ({"partition": "gpu\n"}, r"--partition 'gpu\n': expected a SLURM name"),
        ({"account": "perf\n"}, r"--account 'perf\n': expected a SLURM name"),
        ({"time": "30\n"}, r"--time '30\n': expected minutes, MM:SS"),
        ({"time": "99999999999999999999"}, f"expected at most {TIME_LIMIT_MINUTES} minutes"),
        ({"time": "1" * 5000}, f"expected at most {TIME_LIMIT_MINUTES} minutes"),
        ({"time": f"{TIME_LIMIT_MINUTES // 1440 + 1}-00"}, f"expected at most {TIME_LIMIT_MINUTES}"),
        ({"nodes": COUNT_LIMIT + 1}, f"--nodes {COUNT_LIMIT + 1}: expected at most {COUNT_LIMIT}"),
        ({"gpus_per_node": 2**64}, f"--gpus-per-node {2**64}: expected at most {COUNT_LIMIT}"),
    ],
)
def test_cluster_values_are_matched_whole_and_bounded(cluster: dict[str, Any], message: str) -> None:
    """`$` let a trailing line break through, and a --time past 64 bits became a pod deadline."""
    with pytest.raises(InvalidInput, match=re.escape(message)):
        ClusterRequest(**cluster)


def test_the_longest_time_limit_is_taken() -> None:
    assert ClusterRequest(time=str(TIME_LIMIT_MINUTES)).time == str(TIME_LIMIT_MINUTES)


@pytest.mark.parametrize("namespace", ['a"b', "Perf", "-perf", "perf-", "a" * 64, "perf\n", ""])
def test_a_namespace_must_be_a_dns_1123_label(namespace: str) -> None:
    options = LaunchOptions("k8s", image="ghcr.io/jaxbench/jax:cuda", namespace=namespace, dry_run=True)
    with pytest.raises(InvalidInput, match=r"^--namespace .*: expected a Kubernetes namespace, a DNS-1123"):
        K8sLauncher(options)


BAD_IMAGES = ["foo bar", "foo\nbar", "ghcr.io/jaxbench/jax:cpu\n", "Upper/case", "a:b:c", "x@sha256:12", ""]


@pytest.mark.parametrize("image", BAD_IMAGES[:-1])
def test_images_follow_the_oci_reference_grammar(image: str) -> None:
    """An image with a space or a line break went into the manifest "validated offline"."""
    for launcher in ("k8s", "image"):
        options = LaunchOptions(launcher, image=image, dry_run=launcher == "k8s")
        with pytest.raises(InvalidInput, match=r"^--image .*: expected an image reference"):
            (K8sLauncher if launcher == "k8s" else ImageLauncher)(options)
    with pytest.raises(InvalidInput, match=r"^--image .*: expected an image reference"):
        SlurmLauncher(LaunchOptions("slurm", image=image, dry_run=True))


@pytest.mark.parametrize(
    "image",
    [
        "img",
        "ghcr.io/jaxbench/jax:cuda-2026-11-26",
        "localhost:5000/jax@sha256:" + "a" * 64,
        "[::1]:5000/jax:1",
        "registry.example.com/team__x/jax-cpu.v2:tag_1.0-rc",
    ],
)
def test_image_references_in_use_are_taken(image: str) -> None:
    for launcher in ("k8s", "image", "slurm"):
        options = LaunchOptions(launcher, image=image, dry_run=launcher != "image")
        launcher_type = {"k8s": K8sLauncher, "image": ImageLauncher, "slurm": SlurmLauncher}[launcher]
        assert launcher_type(options).image == image  # type: ignore[attr-defined]


def test_pyxis_also_takes_enroot_references_and_squashfs_files() -> None:
    for image in ("nvcr.io#nvidia/jax:24.04", "/shared/images/jax.sqsh"):
        assert SlurmLauncher(LaunchOptions("slurm", image=image, dry_run=True)).image == image
    with pytest.raises(InvalidInput, match="enroot's REGISTRY#NAME"):
        SlurmLauncher(LaunchOptions("slurm", image="/shared/my images/jax.sqsh", dry_run=True))


class _NoSlurm:
    """SLURM's commands, asked for nothing: the launch must stop before it submits."""

    def submit(self, script: Path) -> str:
        raise AssertionError(f"submitted {script}")

    def job(self, job_id: str) -> Any:
        raise AssertionError("asked for a job")

    def cancel(self, job_id: str) -> None:
        raise AssertionError("cancelled a job")

    def version(self) -> str:
        return "slurm 23.11.4"
