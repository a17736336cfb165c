"""A cluster launcher's own result for a job whose processes wrote none (rank 0 crashed or was killed), and
its amendment of the result process 0 wrote where that does not name the job's failure.

Either way the run is a result in --out, in the schema every run writes, that the store ingests: never
lost, its reason naming the rank, host and the scheduler's account. Both cluster launchers end their jobs
here (`settle`): SLURM's (slurm.py) and Kubernetes' (k8s.py). What the launcher knows and writes:
docs/design.md, "A job's failure as a result".

    jaxbench run llama2 --launcher slurm --time 1      # a job over its time limit: a failed result
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from jaxbench.core.errors import InvalidInput
from jaxbench.harness import flags as harness_flags
from jaxbench.harness.config import Recipe
from jaxbench.harness.flags import environment
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.launch import ClusterRequest, Launched
from jaxbench.harness.launch.local import exit_code
from jaxbench.harness.provenance import collection, record
from jaxbench.harness.recipes import RecipeError
from jaxbench.harness.run import runner
from jaxbench.harness.run.inputs import check_inputs
from jaxbench.harness.runtime import preflight
from jaxbench.harness.runtime.options import NATIVE_BACKEND, RunOptions
from jaxbench.harness.runtime.outcome import Outcome
from jaxbench.harness.runtime.result import RunResult, Status, flags_record, read_result, write_result

if TYPE_CHECKING:
    from rich.console import Console

UNKNOWN = "unknown"
"""Where the launcher cannot know what the processes would have found (a GPU model it does not see)."""


def planned_hint(request: ClusterRequest, environ: Mapping[str, str]) -> DeviceHint:
    """The devices the processes will find, as far as the submitting machine can tell: a job that asks for
    GPUs gets them unless JAX_PLATFORMS (which the job inherits) keeps JAX off them; otherwise what this
    machine has (a CPU test node, or a login node like the compute nodes)."""
    here = environment.device_hint(environ)
    if request.gpus_per_node and not environment.gpus_excluded(environ) and here.platform != "gpu":
        return DeviceHint("gpu", UNKNOWN)
    return here


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a job will run, resolved before it is submitted."""

    run: RunOptions
    recipe: Recipe
    optimal_loss: float
    hint: DeviceHint
    devices: int
    """Devices of the whole job: its GPUs, or one per process."""
    processes: int
    image: str | None
    environ: Mapping[str, str]
    """The environment the processes start with, as far as the launcher knows it: its own, which a SLURM
    job inherits; a pod's, as its manifest sets it."""


def plan(
    run: RunOptions,
    request: ClusterRequest,
    image: str | None,
    environ: Mapping[str, str],
    hint: DeviceHint | None = None,
) -> Plan:
    """The recipe as the processes will resolve it on the devices of `hint` (default: `planned_hint`);
    InvalidInput (a recipe, size, override or backend the processes would refuse) before anything is
    submitted."""
    hint = planned_hint(request, environ) if hint is None else hint
    inputs = check_inputs(run, hint, environ)
    devices = request.nodes * request.gpus_per_node if request.gpus_per_node else request.tasks
    return Plan(run, inputs.recipe, inputs.optimal_loss, hint, devices, request.tasks, image, environ)


def unreported_result(
    job: Plan,
    *,
    status: Status,
    reason: str,
    started_at: str,
    cluster_job: record.ClusterJob,
    host: str,
) -> RunResult:
    """The result of a job none of whose processes wrote one: what was asked, how it ended, nothing
    measured."""
    run, recipe, environ = job.run, job.recipe, job.environ
    try:  # as the processes choose them; flags jaxlib does not know are recorded as dropped
        flag_set = harness_flags.for_run(
            recipe.xla_flags,
            recipe.flag_overrides,
            job.hint,
            environ,
            drop_unknown=True,
            precision=recipe.train.precision.value,
        )
    except InvalidInput:  # the processes refused them too: the result goes without
        flag_set = None
    machine = preflight.Machine(job.hint.platform, job.hint.device_kind, job.devices)
    try:
        mesh_shape = preflight.resolve_mesh_shape(recipe.parallelism.mesh, job.devices)
    except RecipeError:  # the processes refused it too: the mesh as the recipe wrote it
        mesh_shape = dict(recipe.parallelism.mesh)
    # The environment that trains is this one when the job runs this interpreter's harness natively;
    # inside an image, or a framework's own, it is not known here.
    ours = job.image is None and run.backend == NATIVE_BACKEND
    unknown_image = record.ImageInfo(reference=job.image, manifest=None, manifest_path=None)
    origin = record.Provenance(
        versions=collection.collect_versions()
        if ours
        else collection.collect_versions(distribution_version=lambda _: None, python=UNKNOWN),
        devices=record.DeviceInfo(
            platform=job.hint.platform,
            kind=job.hint.device_kind,
            count=job.devices,
            local_count=max(job.devices // job.processes, 1),
            process_count=job.processes,
            hostname=host,
        ),
        driver=record.GpuDriver(driver_version=None, cuda_version=None),
        env=record.performance_env({**environ, **(environment.variables(flag_set) if flag_set else {})}),
        image=collection.read_image_info(environ) if job.image is None else unknown_image,
        git=collection.read_git_info(runner.PROJECT_DIR, environ=environ),
        job=cluster_job,
    )
    return runner.assemble_result(
        recipe,
        runner.recipe_record(recipe, run),
        machine,
        mesh_shape,
        Outcome(status=status, reason=reason),
        optimal_loss=job.optimal_loss,
        peak_bytes=None,
        started_at=started_at,
        origin=origin,
        flags=flags_record(flag_set) if flag_set else None,
        backend=run.backend,
        schedule=run.schedule,
    )


AMENDED = frozenset({Status.INTERRUPTED, Status.FAILED})
"""What process 0 says when another process's failure stopped it (the scheduler's SIGTERM, a collective
that broke): the job's own status replaces these. Its own diagnosis (oom, nan, compile_error) stays."""


def amend(path: Path, status: Status, reason: str) -> Path:
    """Process 0's result at `path`, where it did not end ok, made to say how the job ended: `reason`
    first, then its own; its status becomes `status` where it was only a consequence (AMENDED)."""
    written = read_result(path)
    if written.status is Status.OK:  # every process trained to the end: the measurement stands
        return path
    own = f"; process 0: {written.reason}" if written.reason else ""
    amended = written.model_copy(
        update={
            "status": status if written.status in AMENDED else written.status,
            "reason": reason + own,
        }
    )
    return write_result(amended, path.parent)


NAMED_RANKS = 4
"""Ranks a failure names one by one; the rest are counted (a 512-rank job that fails names 4)."""


@dataclasses.dataclass(frozen=True)
class Ending:
    """How a job that did not end well ended, as its launcher saw it."""

    status: Status
    """The run's status: Status.INTERRUPTED where the launcher stopped it (or someone else did), Status.OOM
    where the scheduler says a process ran out of memory, else Status.FAILED."""
    reason: str
    """The job first, then why it failed: `SLURM job 42: a rank failed (SLURM: FAILED, NonZeroExitCode):
    rank 1 on node-0 exited with 42`."""
    interrupted: bool
    """The launcher stopped it (Ctrl-C, SIGTERM): a result process 0 wrote is its own account of that."""
    started_at: str
    """When the job was submitted (ISO 8601): the start of the launcher's own result."""
    cluster_job: record.ClusterJob
    host: str
    """Where the launcher's own result says it ran: the host of the rank that failed first, where known."""
    missing: str
    """What the launcher's own result says of the one missing: `no rank wrote a result`."""
    logs: str | None = None
    """Where the processes' logs are, where they outlive the job: `logs in <folder>`."""


def settle(job: Plan, written: list[Path], out: Path, ending: Ending, console: Console) -> Launched:
    """The results of a job that did not end well: the launcher's own in `out` where no process wrote one;
    else process 0's, made to say how the job ended, unless the launcher stopped the job (then process 0's
    `interrupted` result says it all)."""
    if not written:
        logs = f" ({ending.logs})" if ending.logs else ""
        unreported = unreported_result(
            job,
            status=ending.status,
            reason=f"{ending.reason}; {ending.missing}{logs}",
            started_at=ending.started_at,
            cluster_job=ending.cluster_job,
            host=ending.host,
        )
        path = write_result(unreported, out)
        console.print(f"{ending.missing}: the launcher wrote {path}", markup=False)
        return Launched(exit_code(ending.status), [path])
    if ending.interrupted:
        return Launched(exit_code(ending.status), written)
    results = []
    for path in written:
        try:
            results.append(amend(path, ending.status, ending.reason))
        except InvalidInput as error:  # another version's result (an image's): kept as it came
            console.print(f"kept as process 0 wrote it, without the job's reason: {error}", markup=False)
            results.append(path)
    return Launched(exit_code(ending.status), results)
