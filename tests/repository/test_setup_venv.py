"""scripts/setup-venv, which make runs to set up .venv: a line before each step with what it costs, pip's
collecting lines as progress (not its hundreds of others), and a failed install that stops it.

    .venv/bin/python -m pytest -q tests/repository/test_setup_venv.py
"""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "setup-venv"

FAKE_PYTHON = """#!/usr/bin/env bash
echo "python $*" >> "$(dirname "$0")/../calls"
case "$*" in
  *"-e .[cpu]"*) echo "Collecting jax"; echo "  Using cached jax-0.12.0.whl"; echo "Collecting flax";
                 echo "Requirement already satisfied: numpy"; echo "Successfully installed flax jax";
                 [ -z "${FAIL_INSTALL:-}" ] || { echo "ERROR: no matching distribution" >&2; exit 1; } ;;
  *"jaxbench.containers.resolve cpu"*) echo "jax==0.12.0" ;;
esac
"""


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "jaxbench"):
        stub = venv / "bin" / name
        stub.write_text(FAKE_PYTHON)
        stub.chmod(0o755)
    return venv


def _setup(venv: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), str(venv), "cpu", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        check=False,
    )


def test_each_step_is_announced_with_its_cost_and_pips_progress_is_its_collecting_lines(
    tmp_path: Path,
) -> None:
    venv = _venv(tmp_path)
    done = _setup(venv)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = [line for line in lines if line.startswith("[")]
    assert [line.split("]")[0] + "]" for line in steps] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert "about a minute on a first install" in steps[2]
    assert [line for line in lines if not line.startswith("[") and "ready in" not in line] == [
        "Collecting jax",
        "Collecting flax",
        "Successfully installed flax jax",
    ]
    assert lines[-1].startswith(f"{venv} ready in ")
    assert (venv / "constraints.txt").read_text() == "jax==0.12.0\n"
    assert "manifest record --venv cpu" in (venv / "calls").read_text()


def test_a_failed_install_stops_before_the_stack_is_recorded(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    done = _setup(venv, FAIL_INSTALL="1")
    assert done.returncode != 0
    assert "ERROR: no matching distribution" in done.stderr
    assert "[4/4]" not in done.stdout and "manifest record" not in (venv / "calls").read_text()


def test_an_extra_is_one_step(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    (venv / "constraints.txt").write_text("jax==0.12.0\n")
    done = _setup(venv, "test")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("[1/1] the 'test' dependencies")
    assert "-e .[cpu,test]" in (venv / "calls").read_text()
