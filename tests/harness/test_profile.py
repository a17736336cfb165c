"""`jaxbench run --profile`: a few steps traced after the timed ones, and the trace reduced to
where their time went, by kind of op and host; the reduction on hand-made events, the categories on
hand-written HLO, and a real profiled run of the tiny LLaMA on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from jaxbench.core.errors import ExitCode
from jaxbench.harness.measure import hlo, profile
from jaxbench.harness.measure.hlo import CONTAINER
from jaxbench.harness.runtime.result import RunResult, read_program_text
from tests.conftest import REPO
from tests.support.processes import jaxbench

HLO = """HloModule jit_step, entry_computation_layout={(f32[8,8]{1,0})->f32[8,8]{1,0}}

%fused_dot (p0: f32[8,8]) -> f32[8,8] {
  %p0 = f32[8,8]{1,0} parameter(0)
  ROOT %d = f32[8,8]{1,0} dot(%p0, %p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_add (p1: f32[8,8]) -> f32[8,8] {
  %p1 = f32[8,8]{1,0} parameter(0)
  ROOT %a = f32[8,8]{1,0} add(%p1, %p1)
}

%body (s: f32[8,8]) -> f32[8,8] {
  %s = f32[8,8]{1,0} parameter(0)
  ROOT %inner = f32[8,8]{1,0} fusion(%s), kind=kLoop, calls=%fused_add
}

%cond (c: f32[8,8]) -> pred[] {
  %c = f32[8,8]{1,0} parameter(0)
  ROOT %t = pred[] constant(true)
}

ENTRY %main (x: f32[8,8]) -> f32[8,8] {
  %x = f32[8,8]{1,0} parameter(0)
  %matmul_fusion = f32[8,8]{1,0} fusion(%x), kind=kOutput, calls=%fused_dot
  %copy.1 = f32[8,8]{1,0} copy(%matmul_fusion)
  %all-reduce.2 = f32[8,8]{1,0} all-reduce(%copy.1), replica_groups={}, to_apply=%fused_add
  ROOT %loop = f32[8,8]{1,0} while(%all-reduce.2), condition=%cond, body=%body
}
"""


def test_each_instruction_a_profile_names_has_its_time_category() -> None:
    categories = hlo.time_categories(HLO)
    assert categories["matmul_fusion"] == "matmul"  # a fusion is what it fuses
    assert categories["inner"] == "elementwise fusions"
    assert categories["copy.1"] == "copies"
    assert categories["all-reduce.2"] == "collectives"
    assert categories["loop"] == CONTAINER
    assert "d" not in categories and "a" not in categories  # inside fusions: a profile never names them
    assert profile.module_name(HLO) == "jit_step"


def op(name: str, start: float, duration: float, module: str = "jit_step") -> dict[str, Any]:
    return {
        "ph": "X",
        "name": name,
        "ts": start,
        "dur": duration,
        "args": {"hlo_op": name, "hlo_module": module},
    }


def test_each_instant_is_counted_once_and_the_kinds_add_up_to_the_wall_time() -> None:
    events = [
        op("loop", 0, 500),  # a container: its ops below are counted; its own time between them is other
        op("inner", 0, 200),
        op("inner", 300, 200),
        op("matmul_fusion", 600, 1000),
        op("all-reduce.2", 1400, 400),  # overlaps the matmul for 200 us: shared between the two
        op("copy.1", 2000, 100),
        op("mystery", 2100, 100),  # not in the HLO: other
        op("matmul_fusion", 0, 10_000, module="jit_init"),  # another program
        {"ph": "X", "name": "PjitFunction(step)", "ts": 0, "dur": 3000},  # host side, no op
    ]
    seconds = profile.breakdown(events, hlo.time_categories(HLO), "jit_step", wall_s=0.003, steps=2)
    assert seconds == pytest.approx(
        {
            "matmul": 450e-6,  # (800 + 100) / 2
            "attention": 0.0,
            "collectives": 150e-6,  # (100 + 200) / 2
            "elementwise fusions": 200e-6,
            "copies": 50e-6,
            "other": 100e-6,  # the loop's own 100 us, and the unknown op's
            "host": 550e-6,  # 3000 us of wall, 1900 us of it covered by ops
        }
    )
    assert list(seconds) == [*hlo.TIME_CATEGORIES, profile.HOST]
    assert sum(seconds.values()) == pytest.approx(0.003 / 2)


def test_a_trace_with_no_op_of_the_step_is_all_host() -> None:
    seconds = profile.breakdown([op("x", 0, 5, module="other")], {}, "jit_step", wall_s=0.01, steps=1)
    assert seconds[profile.HOST] == pytest.approx(0.01) and sum(seconds.values()) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="expected at least one step"):
        profile.breakdown([], {}, "jit_step", wall_s=0.01, steps=0)


@pytest.mark.slow
def test_a_profiled_run_keeps_its_trace_and_says_where_the_time_went(tmp_path: Path) -> None:
    """XLA:CPU names its ops in a trace only with --xla_cpu_enable_xprof_traceme (GPU kernels always do)."""
    done = jaxbench(
        "run",
        "llama2",
        "--steps",
        "4",
        "--set",
        "train.warmup_steps=1",
        "--profile",
        "2",
        out=tmp_path,
        xla_flags="--xla_cpu_enable_xprof_traceme=true",
    )
    assert done.returncode == ExitCode.OK, done.stderr
    [path] = tmp_path.glob("*.json")
    result = RunResult.model_validate(json.loads(path.read_text()))
    recorded = result.profile
    assert recorded is not None and recorded.problem is None and recorded.steps == 2
    assert recorded.trace is not None and list((tmp_path / recorded.trace).glob(profile.TRACE_GLOB))
    seconds = recorded.seconds_per_step
    assert seconds["matmul"] > 0 and seconds["elementwise fusions"] > 0 and seconds[profile.HOST] >= 0
    assert recorded.wall_s is not None
    assert sum(seconds.values()) == pytest.approx(recorded.wall_s / recorded.steps)
    # The timed steps are the run's own: the profiled ones come after them and are not among them. (How
    # close the profiled steps come to the timed ones is measured in benchmarks/profile_accounting.py.)
    assert len(result.timing.raw_step_times_s) == 4


XPROF_PYTHON = REPO / ".venv-maxtext" / "bin" / "python"
"""XProf, the profiler's own tool (`xprof` from PyPI), is in the MaxText virtualenv (make venv FLAVOR=maxtext,
which .ci/run makes), not in the harness's: it pins its own protobuf and pulls 100 MB."""
OPEN_WITH_XPROF = """
import json, sys
from xprof.convert import raw_to_tool_data
tools = raw_to_tool_data.xspace_to_tool_names([sys.argv[1]])
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "trace_viewer", {})
names = sorted({event.get("name") or "" for event in json.loads(data)["traceEvents"]})
print(json.dumps({"tools": tools, "names": names}))
"""


@pytest.mark.frameworks
def test_xprof_opens_the_trace_and_sees_the_step_s_ops(tmp_path: Path) -> None:
    if not XPROF_PYTHON.exists():
        if os.environ.get("JAXBENCH_REQUIRE_FRAMEWORKS") == "1":
            pytest.fail(f"{XPROF_PYTHON} is missing: make venv FLAVOR=maxtext")
        pytest.skip("no MaxText virtualenv with XProf (make venv FLAVOR=maxtext)")
    done = jaxbench(
        "run", "llama2", "--steps", "3", "--set", "train.warmup_steps=1", "--profile", "1", "--keep-hlo",
        out=tmp_path, xla_flags="--xla_cpu_enable_xprof_traceme=true",
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    [path] = tmp_path.glob("*.json")
    result = RunResult.model_validate(json.loads(path.read_text()))
    assert result.profile is not None and result.profile.trace is not None and result.program is not None
    [xplane] = (tmp_path / result.profile.trace).glob("plugins/profile/*/*.xplane.pb")
    opened = subprocess.run(
        [str(XPROF_PYTHON), "-c", OPEN_WITH_XPROF, str(xplane)], capture_output=True, text=True, timeout=300
    )
    assert opened.returncode == 0, opened.stderr[-2000:]
    seen = json.loads(opened.stdout.strip().splitlines()[-1])
    assert "trace_viewer@" in seen["tools"] and "overview_page" in seen["tools"]
    text = read_program_text(path, result.program)
    assert text is not None
    fusions = {name for name, kind in hlo.time_categories(text).items() if kind == "matmul"}
    assert fusions & set(seen["names"])  # the step's matmul ops, as XProf's trace viewer names them


def test_a_framework_backend_cannot_be_profiled(tmp_path: Path) -> None:
    done = jaxbench("run", "llama2", "--backend", "maxtext", "--profile", out=tmp_path)
    assert done.returncode == ExitCode.INVALID_INPUT
    assert done.stderr.strip() == (
        "error: --profile: the maxtext backend trains in its framework's own process, which this profiler "
        "cannot reach; expected --backend native"
    )
    assert list(tmp_path.iterdir()) == []
