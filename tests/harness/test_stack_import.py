"""A component of the stack that fails to import is a failed run naming it, not a bug of jaxbench: a commit
of optax that does not parse, one that raises at import, a package the stack lacks. A failure in jaxbench's
own code stays a bug with its traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jaxbench.core.errors import RunFailed
from jaxbench.core.files import PROJECT_DIR
from jaxbench.harness.backends import BACKENDS, BackendEntry, get_backend
from jaxbench.harness.backends.stack_import import is_own_code, stack_import_failure, top_package
from jaxbench.main import INTERNAL_ERROR, main


@pytest.fixture
def backend_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A throwaway backend (one module, one BACKENDS line) that imports `brokenstack`, a package written
    under tmp_path with the given __init__.py text (None: no such package)."""

    def make(package_text: str | None) -> Path:
        (tmp_path / "throwaway_backend.py").write_text(
            "import brokenstack\n\nclass ThrowawayBackend:\n    name = 'throwaway'\n"
        )
        package = tmp_path / "brokenstack"
        if package_text is not None:
            (package / "sub").mkdir(parents=True)
            (package / "__init__.py").write_text("from brokenstack.sub import step\n")
            (package / "sub" / "__init__.py").write_text(package_text)
        monkeypatch.syspath_prepend(str(tmp_path))
        for name in ("throwaway_backend", "brokenstack", "brokenstack.sub"):
            monkeypatch.delitem(sys.modules, name, raising=False)
        entry = BackendEntry("throwaway_backend", "ThrowawayBackend", None, ("llama2",))
        monkeypatch.setitem(BACKENDS, "throwaway", entry)
        return package / "sub" / "__init__.py"

    return make


def test_a_component_that_does_not_parse_is_a_failed_run_naming_it(backend_over) -> None:  # type: ignore[no-untyped-def]
    source = backend_over("def step(:\n")
    with pytest.raises(RunFailed) as failure:
        get_backend("throwaway")
    message = str(failure.value)
    assert message.startswith("the stack does not import: brokenstack fails with SyntaxError")
    assert f"({source}, line 1)" in message


def test_a_component_that_raises_at_import_is_named_with_its_file(backend_over) -> None:  # type: ignore[no-untyped-def]
    source = backend_over("raise RuntimeError('needs a newer jax')\n")
    with pytest.raises(RunFailed, match=r"brokenstack fails with RuntimeError: needs a newer jax") as failure:
        get_backend("throwaway")
    assert str(source) in str(failure.value)


def test_a_component_the_stack_lacks_is_named(backend_over) -> None:  # type: ignore[no-untyped-def]
    backend_over(None)
    with pytest.raises(RunFailed, match=r"brokenstack is not installed"):
        get_backend("throwaway")


def test_the_command_prints_one_line_and_exits_as_a_failed_run(
    backend_over,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    backend_over("def step(:\n")
    code = main(["run", "llama2", "--backend", "throwaway", "--size", "tiny", "--no-ingest"])
    error = capsys.readouterr().err
    assert code == 3, error
    assert INTERNAL_ERROR not in error and "Traceback" not in error
    assert error.strip().startswith("error: the stack does not import: brokenstack fails with SyntaxError")


def test_a_failure_in_jaxbenchs_own_code_stays_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        BACKENDS, "throwaway", BackendEntry("jaxbench.harness.no_such_backend", "X", None, ("llama2",))
    )
    with pytest.raises(ModuleNotFoundError):
        get_backend("throwaway")
    own = PROJECT_DIR / "harness" / "backends" / "__init__.py"
    try:
        compile("def step(:\n", str(own), "exec")
    except SyntaxError as error:
        assert stack_import_failure(error, PROJECT_DIR) is None
    else:
        raise AssertionError("expected a SyntaxError")


def test_the_virtualenv_inside_the_checkout_holds_the_stack_not_jaxbench() -> None:
    assert is_own_code(PROJECT_DIR / "triage" / "logic.py", PROJECT_DIR)
    assert not is_own_code(PROJECT_DIR / ".venv" / "lib" / "optax" / "__init__.py", PROJECT_DIR)
    assert not is_own_code(Path("/opt/venv/lib/python3.13/site-packages/optax/__init__.py"), PROJECT_DIR)


def test_the_component_is_the_top_level_name_on_the_import_path(tmp_path: Path) -> None:
    # optax's _src has no __init__.py: the name comes from the import path, not from packages.
    (tmp_path / "optax" / "_src").mkdir(parents=True)
    (tmp_path / "optax" / "__init__.py").write_text("")
    (tmp_path / "optax" / "_src" / "alias.py").write_text("")
    (tmp_path / "single.py").write_text("")
    search = [str(tmp_path / "elsewhere"), str(tmp_path)]
    assert top_package(tmp_path / "optax" / "_src" / "alias.py", search) == "optax"
    assert top_package(tmp_path / "optax" / "__init__.py", search) == "optax"
    assert top_package(tmp_path / "single.py", search) == "single"
    nested = [*search, str(tmp_path / "optax")]  # the longest entry that holds the file wins
    assert top_package(tmp_path / "optax" / "_src" / "alias.py", nested) == "_src"
