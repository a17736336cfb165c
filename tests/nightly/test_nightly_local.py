"""`make nightly-local`, the nightly pipeline end to end with its local stand-ins, run for real: two local
nights without a Docker engine (the virtualenv stands in for the image, as `make build` does) and
offline (the bump tracks a stand-in upstream repository). The first night passes and its bump lands on
the stand-in main; the second night's benchmark fails, so its bump waits in a pull request and main keeps
the last stack that worked. CI also runs the target with a Docker engine and a local registry
(`.ci/run`).

    JAX_PLATFORMS=cpu python -m pytest -q tests/nightly/test_nightly_local.py
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO


def nightly(work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("JAXBENCH_DB", "SET", "MAKEFLAGS")}
    environ |= {
        "NIGHTLY_WORK": str(work),
        "ENGINE": "none",
        "OFFLINE": "1",
        "BENCHMARKS": "llama2:tiny",
        "VENV": sys.prefix,
        "JAX_PLATFORMS": "cpu",
        **env,
    }
    return subprocess.run(
        ["scripts/nightly-local"], cwd=REPO, env=environ, capture_output=True, text=True, timeout=900
    )


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(
    not list(Path(sys.prefix).glob(".installed-*")),
    reason="needs the make-built virtualenv (run through make test)",
)
def test_two_local_nights(tmp_path: Path) -> None:
    work = tmp_path / "nightly"
    first = nightly(work)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "build success, publish none, bench success; detect exit 0" in first.stdout
    upstream_head = git(work / "upstream" / "optax", "rev-parse", "HEAD").strip()

    # bump: optax tracks the stand-in upstream at its head
    optax = yaml.safe_load((work / "manifest.yaml").read_text())["components"]["optax"]
    tracked = (optax["repository"], optax["ref"], optax["commit"])
    assert tracked == (str(work / "upstream" / "optax"), "main", upstream_head)
    # judge: the result is in the store under tonight's date, the report and the dashboard exist
    with sqlite3.connect(work / "store.sqlite") as db:
        schedules = [schedule for (schedule,) in db.execute("select schedule from runs")]
    assert schedules == ["nightly"]  # judged: the nightly's own runs pass --nightly
    assert (work / "summary.md").read_text().strip() and (work / "site" / "index.html").is_file()
    assert list((work / "site" / "badges").glob("*.json"))
    # land: every gating job passed, so the stand-in main holds the bump
    landed = yaml.safe_load(git(work / "origin.git", "show", "main:containers/manifest.yaml"))
    assert landed["components"]["optax"]["commit"] == upstream_head
    main_after_first = git(work / "origin.git", "rev-parse", "main").strip()

    assert f"nightly-local: store sqlite:///{work}/store.sqlite (the work folder's" in first.stdout

    # A second night whose benchmark fails before training (a bad override): its bump must not land. Its
    # store is the one JAXBENCH_DB names, not the work folder's.
    other = tmp_path / "other.sqlite"
    second = nightly(work, SET="train.no_such_field=1", JAXBENCH_DB=f"sqlite:///{other}")
    assert "bench failure" in second.stdout, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"nightly-local: store sqlite:///{other} (from JAXBENCH_DB)" in second.stdout
    assert other.is_file()  # the night's ingest and verdict made and read it
    with sqlite3.connect(work / "store.sqlite") as db:
        assert db.execute("select count(*) from runs").fetchone() == (1,)  # the first night's only
    assert second.returncode == 0  # the pipeline itself went through; the failure is a result
    assert git(work / "origin.git", "rev-parse", "main").strip() == main_after_first
    new_head = git(work / "upstream" / "optax", "rev-parse", "HEAD").strip()
    assert new_head != upstream_head
    waiting = yaml.safe_load(git(work / "origin.git", "show", "nightly/manifest:containers/manifest.yaml"))
    assert waiting["components"]["optax"]["commit"] == new_head
    pulls = [json.loads(p.read_text()) for p in (work / "github").rglob("*.json")]
    assert len(pulls) == 1 and "bench: failure" in pulls[0]["body"]
