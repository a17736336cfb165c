"""What the framework backends' tests share: whether a framework's own environment is here to run it for
real (`make venv FLAVOR=<framework>`), and a real run of its trainer through the whole harness."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jaxbench.harness.runtime.options import RunOptions
from jaxbench.harness.runtime.reporter import SilentReporter
from jaxbench.harness.runtime.result import RunResult, Status
from tests.conftest import REPO

PROJECT = REPO
FIXTURES = Path(__file__).parent / "data" / "frameworks"


def require_framework(name: str) -> None:
    """Skip without the framework's virtualenv, unless JAXBENCH_REQUIRE_FRAMEWORKS=1 (.ci/run) makes its
    absence a failure."""
    if (PROJECT / f".venv-{name}" / "bin" / "python").is_file():
        return
    if os.environ.get("JAXBENCH_REQUIRE_FRAMEWORKS") == "1":
        pytest.fail(f".venv-{name} is missing: `make venv FLAVOR={name}` (.ci/run makes it)")
    pytest.skip(f"no .venv-{name} (make venv FLAVOR={name})")


def run_for_real(backend: str, family: str, out: Path, steps: int = 8) -> RunResult:
    from jaxbench.harness.run import runner

    result, path = runner.execute(
        RunOptions(family, size="tiny", steps=steps, out_dir=out, backend=backend), SilentReporter()
    )
    assert result.status is Status.OK, result.reason
    assert result.backend == backend and path is not None and path.exists()
    assert result.framework is not None
    assert result.framework.parameter_count == result.framework.expected_parameter_count
    assert result.provenance.framework is not None and result.provenance.framework.name == backend
    assert result.provenance.image.manifest is not None  # the environment's recorded pins
    assert result.throughput is not None and result.throughput.per_s > 0
    assert len(result.timing.raw_step_times_s) == steps
    return result
