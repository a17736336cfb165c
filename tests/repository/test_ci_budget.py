"""`.ci/run` fails loudly once the whole run passes its budget (35 minutes where the engine held the image
chain's layers when the run began, 50 where it built them cold), and says so when it stays inside: CI's time
is a quality the project guards, not a figure someone has to notice."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import REPO

CI_RUN = REPO / ".ci" / "run"


def budget_check() -> str:
    """The budget lines at the end of .ci/run, from the first line that computes it."""
    lines = CI_RUN.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("budget_min="))
    return "\n".join(lines[start:])


@pytest.mark.parametrize(
    ("cache", "elapsed", "code", "said"),
    [
        ("warm", 34 * 60, 0, "== .ci/run: all steps passed in 34 min 0 s (budget 35 min, image layers warm)"),
        ("warm", 35 * 60 + 5, 1, "== .ci/run: FAILED: the run took 35 min 5 s, past its budget of 35 min"),
        ("cold", 49 * 60, 0, "== .ci/run: all steps passed in 49 min 0 s (budget 50 min, image layers cold)"),
        ("cold", 51 * 60, 1, "== .ci/run: FAILED: the run took 51 min 0 s, past its budget of 50 min"),
    ],
)
def test_the_run_fails_past_its_budget(cache: str, elapsed: int, code: int, said: str) -> None:
    script = f"cache={cache}\nSECONDS={elapsed}\n{budget_check()}"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == code
    assert said in done.stdout + done.stderr
