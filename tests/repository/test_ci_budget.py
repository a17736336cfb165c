"""`.ci/run` fails loudly once the whole run passes its budget (45 minutes by default), and says so when it
stays inside: CI's time is a quality the project guards, not a figure someone has to notice."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import REPO

CI_RUN = REPO / ".ci" / "run"


def budget_check() -> str:
    """The budget lines at the end of .ci/run, from the first line that computes it."""
    lines = CI_RUN.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("budget="))
    return "\n".join(lines[start:])


@pytest.mark.parametrize(
    ("elapsed", "code", "said"),
    [
        (44 * 60, 0, "== .ci/run: all steps passed in 44 min 0 s (budget 45 min)"),
        (46 * 60 + 5, 1, "== .ci/run: FAILED: the run took 46 min 5 s, past its budget of 45 min"),
    ],
)
def test_the_run_fails_past_its_budget(elapsed: int, code: int, said: str) -> None:
    script = f"SECONDS={elapsed}\n{budget_check()}"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == code
    assert said in done.stdout + done.stderr
