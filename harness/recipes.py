"""Recipe files -> validated `Recipe`: size selection, `--set` overrides, and errors that say where.

A recipe file (recipes/<family>.yaml) holds settings shared by every size under `base:` and one overlay per
named size under `sizes:`. Resolving deep-merges base <- size <- overrides and validates the result against
the family's schema. Every error names the file (or the --set flag), the key path and what was expected.

    jaxbench recipes
    jaxbench run llama2 --size tiny --set train.global_batch=16
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import reprlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from jaxbench.core.documents import parse_yaml
from jaxbench.core.errors import InvalidInput, one_line
from jaxbench.core.files import read_text
from jaxbench.core.schema import Strict
from jaxbench.core.suggest import did_you_mean
from jaxbench.harness.config import Recipe, plain_name
from jaxbench.harness.families import FAMILIES

RECIPES_ENV = "JAXBENCH_RECIPES"
TINY = "tiny"


class RecipeError(InvalidInput):
    """A recipe, size or override is invalid; the message is meant for the user as is."""


class RecipeFile(Strict):
    """The top level of a recipe file."""

    family: str
    """Model family: a name in harness/families/__init__.py (FAMILIES)."""
    description: str = ""
    default_size: str
    """Size run on GPUs when --size is not given (on CPU the default is always 'tiny')."""
    base: dict[str, Any] = Field(default_factory=dict)
    """Settings shared by every size."""
    sizes: dict[str, dict[str, Any]]
    """Named sizes: each is an overlay on `base` (model architecture, batch, steps, ...); each name is a
    plain name (harness/config.py: PLAIN_NAME), since it becomes part of result file names."""

    @field_validator("sizes")
    @classmethod
    def _plain_size_names(cls, sizes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in sizes:
            plain_name(name, "size")
        return sizes

    @model_validator(mode="after")
    def _sizes_consistent(self) -> RecipeFile:
        if self.family not in FAMILIES:
            raise ValueError(f"family {self.family!r} is unknown; expected one of {sorted(FAMILIES)}")
        if TINY not in self.sizes:
            raise ValueError(f"sizes must include {TINY!r}, the size that runs on a CPU in seconds")
        if self.default_size not in self.sizes:
            raise ValueError(f"default_size {self.default_size!r} is not among sizes {list(self.sizes)}")
        return self


def recipes_dir() -> Path:
    override = os.environ.get(RECIPES_ENV)
    return Path(override) if override else Path(__file__).resolve().parent.parent / "recipes"


def recipe_path(name: str, directory: Path | None = None) -> Path:
    """A recipe given by name (`llama2`) or by path (`my/recipe.yaml`)."""
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml"):
        if not candidate.is_file():
            raise RecipeError(f"{name}: no such recipe file")
        return candidate
    try:
        plain_name(name, "recipe")
    except ValueError as error:  # a name must not reach outside the recipes folder ('../x')
        raise RecipeError(f"{error}, or the path of a .yaml recipe file") from error
    directory = directory or recipes_dir()
    path = directory / f"{name}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in directory.glob("*.yaml"))
        raise RecipeError(
            f"no recipe named {name!r}{did_you_mean(name, names)} in {directory} "
            f"(available: {', '.join(names) or 'none'})"
        )
    return path


def available_recipes(directory: Path | None = None) -> list[Path]:
    return sorted((directory or recipes_dir()).glob("*.yaml"))


def load_recipe_file(path: Path) -> RecipeFile:
    try:
        raw = parse_yaml(read_text(path), str(path))
    except InvalidInput as error:
        raise RecipeError(str(error)) from error
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        return RecipeFile.model_validate(raw)
    except ValidationError as error:
        raise RecipeError(_describe(error, lambda loc: f"{path}: {_dotted(loc)}", RecipeFile)) from error


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """`key.path=value` -> (("key", "path"), value); the value is read as YAML (numbers, lists, null)."""
    key, sep, value = text.partition("=")
    path = tuple(key.strip().split("."))
    if not sep or not all(path):
        raise RecipeError(f"{override_flag(text)}: expected key.path=value, e.g. train.global_batch=16")
    try:
        parsed = parse_yaml(value, f"{override_flag(text)}: the value") if value.strip() else ""
    except InvalidInput as error:
        raise RecipeError(str(error)) from error
    return path, parsed


SHOWN_OVERRIDE = 80
"""The most characters of a `--set` an error repeats: enough to recognise it, short enough that what is wrong
with it still fits the one line a refusal is (core/errors.py: one_line)."""


def override_flag(text: str) -> str:
    """`--set key.path=value` as errors name it, the value shortened where it is long."""
    return f"--set {one_line(text, SHOWN_OVERRIDE)}"


def _settings(path: tuple[str, ...], value: Any) -> list[tuple[str, ...]]:
    """The key paths an override sets: a mapping is merged key by key, any other value replaces its path."""
    if isinstance(value, Mapping):
        return [leaf for key, item in value.items() for leaf in _settings((*path, str(key)), item)]
    return [path]


def check_overlaps(parsed: Sequence[tuple[str, tuple[str, ...], Any]]) -> None:
    """RecipeError where two overrides (`--set`, `--steps`) set the same key path, or one a path inside the
    other's: the later would silently replace the earlier, unvalidated (`--steps 8` hiding
    `--set train.steps=abc`). Each path and its prefixes are looked up once: linear in the settings."""
    setters: dict[tuple[str, ...], str] = {}
    below: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {}  # prefix of a set path -> its setter
    for flag, key_path, value in parsed:
        settings = _settings(key_path, value)
        for path in settings:
            above = next((path[:n] for n in range(1, len(path) + 1) if path[:n] in setters), None)
            earlier, shared = (setters[above], above) if above else below.get(path, (None, path))
            if earlier is not None:
                raise RecipeError(
                    f"{earlier} and {flag} both set {_dotted(shared)}; expected each setting once"
                )
        for path in settings:
            setters[path] = flag
            for n in range(1, len(path)):
                below.setdefault(path[:n], (flag, path))


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _nested(path: Sequence[str], value: Any) -> dict[str, Any]:
    result: Any = value
    for key in reversed(path):
        result = {key: result}
    return dict(result)


def resolve(
    source: RecipeFile,
    size: str,
    overrides: Sequence[str] = (),
    *,
    path: Path | str = "<recipe>",
    steps: int | None = None,
) -> Recipe:
    """The validated recipe for one size, with `--set` overrides (and `--steps`) applied last."""
    if size not in source.sizes:
        raise RecipeError(
            f"{path}: no size {size!r}{did_you_mean(size, source.sizes)}; "
            f"expected one of {list(source.sizes)}"
        )
    parsed = [(override_flag(text), *parse_override(text)) for text in overrides]
    if steps is not None:
        parsed.append((f"--steps {steps}", ("train", "steps"), steps))
    for flag, key_path, _ in parsed:
        if key_path[0] in ("family", "size"):
            raise RecipeError(f"{flag}: {key_path[0]} cannot be overridden; choose the recipe and --size")
    check_overlaps(parsed)
    merged = deep_merge(source.base, source.sizes[size])
    for _, key_path, value in parsed:
        merged = deep_merge(merged, _nested(key_path, value))
    merged.update(family=source.family, size=size, description=source.description)

    def origin(loc: tuple[str, ...]) -> str:
        for flag, key_path, _ in reversed(parsed):
            if loc[: len(key_path)] == key_path or key_path[: len(loc)] == loc:
                return f"{flag}: {_dotted(loc)}"
        section = f"sizes.{size}" if _contains(source.sizes[size], loc) else "base"
        return f"{path}: {section}.{_dotted(loc)}"

    recipe_type = FAMILIES[source.family].recipe_type()
    try:
        return recipe_type.model_validate(merged)
    except ValidationError as error:
        raise RecipeError(_describe(error, origin, recipe_type)) from error


def load(
    name: str,
    size: str | None = None,
    overrides: Sequence[str] = (),
    *,
    default_to_tiny: bool = True,
    steps: int | None = None,
) -> Recipe:
    """Load recipe `name` at `size`; with no size, 'tiny' (default_to_tiny) or the file's default_size."""
    path = recipe_path(name)
    source = load_recipe_file(path)
    chosen = size or (TINY if default_to_tiny else source.default_size)
    return resolve(source, chosen, overrides, path=path, steps=steps)


def recipe_hash(recipe: Recipe) -> str:
    """sha256 of the canonical JSON of every resolved setting: equal hashes mean identical configurations."""
    canonical = json.dumps(recipe.resolved(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _contains(tree: Mapping[str, Any], loc: Sequence[str]) -> bool:
    node: Any = tree
    for key in loc:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def _dotted(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc) or "<top level>"


_SHOWN = reprlib.Repr(maxlevel=3, maxlist=6, maxtuple=6, maxstring=60, maxlong=40, maxother=60)
"""How a refused value is quoted: its start, never all of it (a list of a million elements would otherwise
be a message of megabytes)."""


def _describe(error: ValidationError, where: Any, model: type[BaseModel]) -> str:
    """Every problem pydantic found, in one line (a refusal is one line: jaxbench/main.py); an unknown
    key is named as such, with the nearest key of its section."""
    lines = []
    for item in error.errors(include_url=False):
        loc = tuple(str(part) for part in item["loc"] if not str(part).startswith("function-"))
        given = item.get("input")
        shown = "" if isinstance(given, dict) or item["type"] == "missing" else f" (got {_SHOWN.repr(given)})"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = f"no such setting{did_you_mean(loc[-1], _keys_at(model, loc[:-1]))}"
        lines.append(f"{where(loc)}: {message}{shown}")
    return "; ".join(lines)


def _keys_at(model: type[BaseModel], loc: tuple[str, ...]) -> list[str]:
    """The keys a recipe may set at `loc` (a section of the model); [] where `loc` is not a section."""
    for part in loc:
        field = model.model_fields.get(part)
        inner = field.annotation if field is not None else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            return []
        model = inner
    return list(model.model_fields)


def recipe_size_choices(directory: Path | None = None) -> dict[str, tuple[str, list[str]]]:
    """Each recipe file (by name) -> (its default size, its sizes): what a `recipe:size` may name."""
    choices = {}
    for path in available_recipes(directory):
        source = load_recipe_file(path)
        choices[path.stem] = (source.default_size, list(source.sizes))
    return choices


def benchmarks(
    items: Sequence[str], choices: Mapping[str, tuple[str, Sequence[str]]], what: str
) -> list[tuple[str, str]]:
    """(recipe, size) pairs of `recipe[:size]` items (the recipe's default size where none is given), each
    checked against `choices` (recipe_size_choices); `what` names the input in the error."""
    pairs = []
    for item in items:
        recipe, _, size = item.partition(":")
        if recipe not in choices:
            raise InvalidInput(f"{what}: {item}: no recipe {recipe!r} (expected {', '.join(choices)})")
        default, sizes = choices[recipe]
        size = size or default
        if size not in sizes:
            raise InvalidInput(f"{what}: {item}: recipe {recipe} has no size {size!r} ({', '.join(sizes)})")
        pairs.append((recipe, size))
    return list(dict.fromkeys(pairs))
