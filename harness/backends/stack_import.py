"""Whose code failed when a backend's module would not import: a component of the stack (optax at a commit
that does not parse, a package the stack lacks) is a failure of the run, named by the component, not a bug of
jaxbench. A triage probing such a commit reads that line as the commit's result and steps around it.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

_IMPORT_MACHINERY = "<frozen importlib"


def failing_file(error: BaseException) -> str | None:
    """The source file the error points at: the file a SyntaxError could not compile, else the innermost
    frame of the traceback outside Python's import machinery."""
    if isinstance(error, SyntaxError) and error.filename:
        return error.filename
    frames = [frame.filename for frame in traceback.extract_tb(error.__traceback__)]
    outside = [name for name in frames if not name.startswith(_IMPORT_MACHINERY)]
    return outside[-1] if outside else None


def top_package(path: Path, search_path: Sequence[str]) -> str:
    """The top-level name a file is imported under: its first part below the longest entry of the import
    path that holds it (`.../site-packages/optax/_src/alias.py` -> optax: `_src` need not be a package)."""
    resolved = path.resolve()
    for entry in sorted(
        (Path(e or ".").resolve() for e in search_path), key=lambda e: len(e.parts), reverse=True
    ):
        try:
            first = resolved.relative_to(entry).parts[0]
        except (ValueError, IndexError):
            continue
        return first.removesuffix(".py")
    return resolved.stem


def is_own_code(path: Path, project_dir: Path) -> bool:
    """Whether a file is jaxbench's own: under the project's folder, and not in a hidden folder there such
    as the harness's virtualenv (.venv), which holds the stack."""
    try:
        relative = path.resolve().relative_to(project_dir.resolve())
    except ValueError:
        return False
    return not relative.parts[0].startswith(".")


def stack_import_failure(error: BaseException, project_dir: Path) -> str | None:
    """One line naming the component whose import failed and how, or None where the failure lies in
    jaxbench's own code (a bug: its traceback must be seen)."""
    if isinstance(error, ModuleNotFoundError) and error.name:
        module = error.name.partition(".")[0]
        if (project_dir / module / "__init__.py").is_file():
            return None
        return f"the stack does not import: {module} is not installed ({error})"
    where = failing_file(error)
    if where is None or is_own_code(Path(where), project_dir):
        return None
    component = top_package(Path(where), sys.path)
    if isinstance(error, SyntaxError):
        detail = f"{type(error).__name__}: {error.msg} ({where}, line {error.lineno})"
    else:
        detail = f"{type(error).__name__}: {error} ({where})"
    return f"the stack does not import: {component} fails with {detail}"
