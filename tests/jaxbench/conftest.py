"""What the fuzz tests of the command share: a sandbox (tests/jaxbench/fuzz_contract.py) holding a store of
one run, the commands' working folder and the store's URL set.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxbench.core.errors import ExitCode
from jaxbench.results import store, synthetic
from tests.jaxbench.fuzz_contract import Sandbox, invoke
from tests.support import fuzz_inputs as inputs


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = Sandbox(tmp_path)
    box.cwd.mkdir(parents=True)
    monkeypatch.chdir(box.cwd)
    monkeypatch.setenv(store.DB_ENV, f"sqlite:///{box.store}")
    valid = synthetic.write(box.root / "seed", synthetic.run_result(inputs.NIGHT, 0.25))
    assert invoke(["ingest", str(valid)]).code == ExitCode.OK
    return box
