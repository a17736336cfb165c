"""The base of every schema (recipes, results, manifests, flag profiles) and how its errors are reported."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class Strict(BaseModel):
    """Frozen, and unknown keys are errors, never ignored; field docstrings become descriptions."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def _field_name(part: object) -> str:
    """A key as written, or quoted where it holds a line break or another unprintable character."""
    text = str(part)
    return text if text.isprintable() else repr(text)


def first_problem(error: ValidationError, prefix: str = "") -> str:
    """`key.path: message` of a validation error's first problem, saying how many more there are."""
    first = error.errors(include_url=False)[0]
    where = prefix + ".".join(map(_field_name, first["loc"])) or "<top level>"
    more = f" (and {error.error_count() - 1} more problems)" if error.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"
