"""The JSON result of one run (schema version 1): what was run, on what, how fast, and how it ended.

The schema lives in the repository as JSON Schema (harness/runtime/schema/run-result.v1.schema.json, generated
from these models; `tests/harness/test_result.py` fails if the two drift). A failed run is a result too:
`status` and `reason` say what happened and the sections that could be measured are filled in. Non-finite
numbers are written as null because JSON has no NaN.

    jaxbench run llama2 --out runs/     # writes runs/<recipe>-<size>-<time>-<id>.json
"""

from __future__ import annotations

import enum
import gzip
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from jaxbench.core.documents import parse_json
from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import file_in, read_text, write_atomic, write_atomic_bytes
from jaxbench.core.schema import Strict, first_problem
from jaxbench.harness.flags import environment
from jaxbench.harness.flags.profiles import FlagSet
from jaxbench.harness.measure.hlo import ProgramSummary
from jaxbench.harness.measure.metrics import METRICS, Direction
from jaxbench.harness.measure.stats import StepTimeStats
from jaxbench.harness.provenance.record import Provenance
from jaxbench.harness.runtime.options import DEFAULT_BACKEND, Schedule

SCHEMA_VERSION: Literal[1] = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / f"run-result.v{SCHEMA_VERSION}.schema.json"
RESOLVED_SECTIONS = ("model", "train", "parallelism")


class Status(enum.StrEnum):
    OK = "ok"
    COMPILE_ERROR = "compile_error"
    OOM = "oom"
    NAN = "nan"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    """Any other error while running."""
    INVALID = "invalid"
    """It trained, but not what the recipe says: a framework built another number of parameters."""


class RecipeRecord(Strict):
    name: str
    """family-size, e.g. llama2-7b."""
    family: str
    size: str
    file: str
    """Path of the recipe file that was resolved."""
    overrides: list[str]
    """The --set overrides, as given (--steps is visible in `resolved`)."""
    hash: str
    """sha256 of the canonical JSON of `resolved`: runs with equal hashes ran identical configurations."""
    resolved: dict[str, Any]
    """Every setting after size selection and overrides."""

    @field_validator("resolved")
    @classmethod
    def _sections_are_mappings(cls, resolved: dict[str, Any]) -> dict[str, Any]:
        """The sections that readers (a series' identity, the expected metrics) look settings up in."""
        for section in RESOLVED_SECTIONS:
            if section in resolved and not isinstance(resolved[section], dict):
                raise ValueError(
                    f"{section}: expected a mapping of settings, got {type(resolved[section]).__name__}"
                )
        return resolved


class Parallelism(Strict):
    mesh: dict[str, int]
    """Resolved mesh axis sizes (data, fsdp, tensor)."""
    device_count: int


class ProcessTiming(Strict):
    """One process of a multi-process run, as process 0 gathered it at the end."""

    process_index: int
    host: str
    step_time_s: StepTimeStats | None
    """Statistics of this process's timed steps (None when the run did not end ok)."""


class Timing(Strict):
    compile_s: float | None
    """Lowering plus compilation of the training step; excluded from step times."""
    warmup_steps: int
    """Steps run after compilation and left out of the statistics."""
    step_time_s: StepTimeStats | None
    """Statistics of the timed steps (None if no step was timed)."""
    raw_step_times_s: list[float]
    """Wall time of every step run, warmup steps first."""
    processes: list[ProcessTiming] = Field(default_factory=list)
    """Every process's own step times in a multi-process run (SLURM, several hosts); empty for one process.
    The headline statistics above are process 0's."""
    cpu_per_wall: float | None = None
    """CPU seconds the process used (all its threads) per wall second of the timed steps; None where not
    measured. Runs of one configuration on one machine use about the same; a run well below its peers was
    starved of CPU by other work (a neighbour, a VM's stolen time), and its step times say so too
    (triage leaves such runs out: triage/clocks.py, starved_runs)."""
    cpu_step_time_s: StepTimeStats | None = None
    """Statistics of the CPU seconds the process used (all its threads) in each timed step; None where not
    measured. Where the step computes on the CPU this is the step's own work, which other processes' load
    moves far less than its wall time (triage times by it where the runs are on one CPU: triage/clocks.py)."""


class Throughput(Strict):
    unit: str
    """What is counted: "token" or "image"."""
    units_per_step: int
    flops_per_unit: float
    """Training FLOPs per unit under `flops_convention`."""
    flops_convention: str
    per_s: float
    """Units per second, all devices (from the median step time)."""
    per_s_per_device: float
    model_tflops_per_device: float
    peak_tflops_per_device: float | None
    """Dense peak of the device at this precision; None for devices not in harness/measure/peaks.py."""
    mfu: float | None
    """model_tflops_per_device / peak_tflops_per_device; None when the peak is unknown."""


class Memory(Strict):
    peak_bytes_per_device: int | None
    """Largest `peak_bytes_in_use` over the local devices, where the backend reports it (GPUs)."""
    compiled_temp_bytes: int | None
    """Scratch memory XLA planned for the step (compiled.memory_analysis()), per device."""
    compiled_argument_bytes: int | None


class Program(Strict):
    """The compiled training step as XLA optimised it: whether two runs compiled the same program, and what
    it holds (harness/measure/hlo.py), beside XLA's own cost estimate."""

    summary: ProgramSummary
    cost: dict[str, float]
    """XLA's cost analysis of the step per device: "flops", "bytes accessed", "transcendentals" (where the
    backend gives them)."""
    hlo_file: str | None = None
    """The optimized HLO text, gzip-compressed, beside the result (kept by default for nightly runs)."""
    input_fingerprint: str | None = None
    """sha256 of the step as JAX handed it to XLA (lowered StableHLO, names and locations normalized:
    harness/measure/stablehlo.py). Equal input and different optimized fingerprints: XLA compiled the same
    input differently (its version, its flags, or on a GPU its GEMM autotuning); None in runs before it."""


class Profile(Strict):
    """A few steps run under the JAX profiler after the timed ones (`jaxbench run --profile STEPS`), and
    where their time went (harness/measure/profile.py)."""

    steps: int
    wall_s: float | None = None
    """The profiled steps end to end (tracing slows them: never a step time)."""
    seconds_per_step: dict[str, float]
    """By kind of op (matmul, attention, collectives, elementwise fusions, copies, other) and "host", the
    time in which no op of the step ran."""
    trace: str | None
    """The trace's folder, relative to the result's (open it in Perfetto or XProf)."""
    problem: str | None = None
    """Why there is no breakdown, where profiling failed (the run's own figures stand)."""


class Loss(Strict):
    per_step: list[float | None]
    """Training loss at every step run (null where it was not finite)."""
    final_window: float | None
    """Mean loss over the last `window_steps` steps; None unless the run ended ok: one that stopped early
    (interrupted, failed) never reached its final window, and its last steps' loss is not the recipe's."""
    window_steps: int
    optimal: float
    """Bayes-optimal loss of the synthetic data (nats)."""


class FlagSetting(Strict):
    value: str
    origin: str
    """Which layer set it: "profile hopper", "profile base", "recipe", "your XLA_FLAGS", ...."""


class FlagsRecord(Strict):
    profile: str
    """The resolved XLA flag profile (auto already decided)."""
    xla_flags: str
    """XLA_FLAGS exactly as the run used it."""
    xla: dict[str, FlagSetting]
    env: dict[str, FlagSetting]
    """The environment variables the flag layers set."""
    dropped: list[str]
    """Flags left out because the installed jaxlib does not know them (--drop-unknown-flags)."""
    identity: str
    """sha256 of the effective flags and variables: part of every series' identity."""
    autotune_cache: str | None = None
    """The folder this run's GEMM autotuning was shared through (GPU runs: harness/flags/autotune.py); its
    flag is in `xla_flags` but not in `xla` or the identity."""


class MetricValue(Strict):
    name: str
    value: float
    unit: str
    direction: Direction


class FrameworkReport(Strict):
    """What a framework's own trainer said of its run, kept beside jaxbench's numbers (framework backends).
    jaxbench's throughput and MFU never come from here: frameworks' FLOPs formulas change between versions."""

    parameter_count: int | None
    """Parameters of the model the framework built (None where it did not say)."""
    expected_parameter_count: int
    """The recipe's (`jaxbench flops`); a difference makes the run invalid."""
    reported_tflops_per_device: float | None
    """Median over the timed steps of the framework's own TFLOP/s per device: a cross-check of ours."""
    reported_tokens_per_s_per_device: float | None
    command: list[str]
    """The trainer's command line, as started."""
    artifacts: str
    """Folder beside the result file: the trainer's log and its own outputs."""


class RunResult(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    run_id: str
    backend: str = DEFAULT_BACKEND
    """Who trained the recipe (harness/backends/): "native" is jaxbench's own Flax models and loop; files
    written before backends existed are native runs."""
    schedule: Schedule | None = None
    """"nightly" (a run of the nightly plan, judged) or "ad-hoc" (by hand, only reported); files written
    before schedules existed have none, and are ingested as nightly runs (LEGACY_SCHEDULE)."""
    status: Status
    reason: str | None
    """Why a run did not end with status ok."""
    started_at: str
    """UTC, ISO 8601."""
    finished_at: str
    command: list[str]
    recipe: RecipeRecord
    parallelism: Parallelism | None
    timing: Timing
    throughput: Throughput | None
    memory: Memory
    loss: Loss | None
    flags: FlagsRecord | None = None
    """The XLA flags and environment of the run, each with its origin."""
    metrics: list[MetricValue] = Field(default_factory=list)
    """Headline numbers with their unit and direction, as the results store ingests them."""
    provenance: Provenance
    framework: FrameworkReport | None = None
    """A framework backend's own account of the run; None for native runs."""
    program: Program | None = None
    """The compiled step's fingerprint and summary, where the backend can see it (native runs that
    compiled); None for runs written before it was recorded."""
    profile: Profile | None = None
    """Where a few profiled steps' time went: runs with --profile only."""


def flags_record(flag_set: FlagSet) -> FlagsRecord:
    return FlagsRecord(
        profile=flag_set.profile,
        xla_flags=environment.variables(flag_set)["XLA_FLAGS"],
        xla={k: FlagSetting(value=s.value, origin=s.origin) for k, s in sorted(flag_set.xla.items())},
        env={k: FlagSetting(value=s.value, origin=s.origin) for k, s in sorted(flag_set.env.items())},
        dropped=list(flag_set.dropped),
        identity=flag_set.identity_hash(),
        autotune_cache=flag_set.autotune_cache,
    )


def metric_values(values: dict[str, float | None]) -> list[MetricValue]:
    """Declared metrics with finite values, in declaration order."""
    out = []
    for name, metric in METRICS.items():
        value = values.get(name)
        if value is not None and math.isfinite(value):
            out.append(MetricValue(name=name, value=value, unit=metric.unit, direction=metric.direction))
    unknown = set(values) - set(METRICS)
    if unknown:
        raise KeyError(f"undeclared metrics {sorted(unknown)}; declare them in harness/measure/metrics.py")
    return out


def json_schema() -> dict[str, Any]:
    schema = RunResult.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://jaxbench.dev/schema/run-result.v{SCHEMA_VERSION}.schema.json"
    return schema


def result_stem(recipe_name: str, started_at: str, run_id: str) -> str:
    """The result file's name without `.json`; a framework's artifacts folder beside it shares it."""
    stamp = started_at.replace(":", "").replace("-", "").split(".")[0]
    return f"{recipe_name}-{stamp}-{run_id[:8]}"


HLO_SUFFIX = ".hlo.txt.gz"


def write_program_text(text: str, directory: Path, stem: str) -> str:
    """The optimized HLO, gzip-compressed, as `stem` + HLO_SUFFIX in `directory`; its file name."""
    name = f"{stem}{HLO_SUFFIX}"
    # mtime=0: the same program gives the same bytes, so a kept HLO file can be compared by its hash too.
    write_atomic_bytes(file_in(directory, name), gzip.compress(text.encode(), mtime=0))
    return name


def read_program_text(result_path: Path, program: Program) -> str | None:
    """The optimized HLO kept beside the result at `result_path`, or None where none was kept."""
    if program.hlo_file is None:
        return None
    path = file_in(result_path.parent, program.hlo_file)
    try:
        return gzip.decompress(path.read_bytes()).decode()
    except FileNotFoundError:
        return None
    except (OSError, EOFError, UnicodeDecodeError) as error:  # gzip.BadGzipFile is an OSError
        raise InvalidInput(f"{path}: not the gzip-compressed HLO text of {result_path} ({error})") from error


def write_result(result: RunResult, directory: Path) -> Path:
    path = file_in(directory, f"{result_stem(result.recipe.name, result.started_at, result.run_id)}.json")
    write_atomic(path, result.model_dump_json(indent=2) + "\n")
    return path


RESULT_IN_LOG_ENV = "JAXBENCH_RESULT_IN_LOG"
"""Set to 1 by a launcher that sees only the processes' output (the k8s launcher, harness/launch/k8s.py):
the process that writes the result prints the file to stdout too, between RESULT_BEGIN and RESULT_END."""
RESULT_BEGIN = "----- jaxbench result begin -----"
RESULT_END = "----- jaxbench result end -----"


def print_result_for_launcher(path: Path, environ: Mapping[str, str]) -> None:
    """The written result file on stdout between the marker lines, where RESULT_IN_LOG_ENV asks for it (a
    JSON line never equals a marker: strings in it hold no raw newline)."""
    if environ.get(RESULT_IN_LOG_ENV) == "1":
        sys.stdout.write(f"{RESULT_BEGIN}\n{path.read_text().rstrip()}\n{RESULT_END}\n")
        sys.stdout.flush()


def read_result(path: Path) -> RunResult:
    """The run result in the file at `path`; InvalidInput naming the file and its first wrong field."""
    try:
        return RunResult.model_validate(parse_json(read_text(path), str(path)))
    except ValidationError as error:
        raise InvalidInput(f"{path}: {first_problem(error)}; expected a jaxbench result file") from error


if __name__ == "__main__":
    # Regenerate the committed schema after changing the models above (and bump SCHEMA_VERSION if an
    # existing reader would misread the new files).
    write_atomic(SCHEMA_PATH, json.dumps(json_schema(), indent=2) + "\n")
    print(f"wrote {SCHEMA_PATH}")
