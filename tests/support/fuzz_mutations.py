"""How the fuzz tests break a valid input (tests/support/fuzz_inputs.py holds the examples): a field dropped,
renamed, added or given a wrong type, a huge or empty string, NaN and Infinity as Python's json writes them,
numbers past float range or 4,300 digits, nesting deeper than the parsers recurse, markup and path-like
names, bytes that are not UTF-8, a cut, and random bytes.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any

import yaml
from hypothesis import strategies as st

DEEP = 20_000
"""Nesting past any recursion limit: json, PyYAML and pydantic all recurse once per level."""
NASTY_STRINGS = (
    "",
    " ",
    "..",
    "../../x",
    "/",
    "[/oops]",
    "[bold red]x",
    "a\nb",
    "\r",
    "\t",
    "\x00",
    "\x1b[31m",
    "é\u202e🚀",
    "x" * 10_000,
    "NaN",
    "-1",
    "1e400",
    "2026-13-45",
    "2026-11-01",
    "%s%n{0}",
    "{",
    "'\"\\",
    "=",
    "--",
    "-h",
)
"""Strings that broke parsers, renderers or file names somewhere: empty, path-like, rich markup, line breaks,
NUL, terminal escapes, right-to-left override, a 10,000-character id, numbers and dates as text."""


@dataclasses.dataclass(frozen=True)
class Raw:
    """Text written into a serialized document as is: what json.dumps or yaml.safe_dump cannot write (a
    number outside float range, nesting deeper than the encoder recurses, a YAML tag or alias)."""

    text: str


RAW_JSON = (
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1" * 5_000,
    "[" * DEEP + "]" * DEEP,
    '{"a":' * DEEP + "1" + "}" * DEEP,
)
"""Tokens Python's json reads (NaN, Infinity) or chokes on (an integer of 5,000 digits, deep nesting)."""
RAW_YAML = (
    ".nan",
    "-.inf",
    "1e400",
    "2026-11-01",
    "[" * DEEP + "]" * DEEP,
    "*undefined",
    "&loop [*loop]",
    "!!python/name:os.system",
    "!!binary notbase64",
    "{[1]: 2}",
    "? [a]\n: b",
)
"""YAML that parses to what no schema expects (dates, a list containing itself) or does not parse."""


def choice[T](values: Sequence[T]) -> st.SearchStrategy[T]:
    """sampled_from, without writing every value into its repr: hypothesis shows a strategy's repr in its
    reports, and these values run to tens of kilobytes (a 10,000-character id, 20,000 brackets)."""
    return st.integers(min_value=0, max_value=len(values) - 1).map(values.__getitem__)


def arguments(texts: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Texts as a process receives them as arguments or variables: no NUL (the OS ends an argument there)."""
    return texts.map(lambda text: text.replace("\x00", ""))


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
        choice(NASTY_STRINGS),
    )


def values(raw: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """Anything a field could be given instead of what it expects."""
    return st.one_of(
        scalars(),
        st.lists(scalars(), max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8), choice(NASTY_STRINGS)), scalars(), max_size=3),
        choice(raw).map(Raw),
    )


def _paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON-like tree: () for the whole tree, then keys and list indexes."""
    found = [prefix]
    if isinstance(tree, dict):
        children: Any = tree.items()
    elif isinstance(tree, list):
        children = enumerate(tree)
    else:
        return found
    for key, child in children:
        found += _paths(child, (*prefix, key))
    return found


def _container_of(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        tree = tree[key]
    return tree


MUTATIONS = ("replace", "drop", "rename", "add")


@st.composite
def mutated(draw: st.DrawFn, document: Any, raw: tuple[str, ...]) -> Any:
    """`document` with one to three fields replaced, dropped, renamed or added (or all of it replaced)."""
    tree = copy.deepcopy(document)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(tree)))
        kind = draw(st.sampled_from(MUTATIONS))
        if not path:  # the whole document
            tree = draw(values(raw))
            continue
        parent, key = _container_of(tree, path), path[-1]
        if kind == "replace":
            parent[key] = draw(values(raw))
        elif kind == "drop":
            del parent[key]
        elif isinstance(parent, dict):
            name = draw(st.one_of(st.text(max_size=12), choice(NASTY_STRINGS)))
            value = parent.pop(key) if kind == "rename" else draw(values(raw))
            parent[name] = value
        else:
            parent.insert(key, draw(values(raw)))
    return tree


def _serialize(tree: Any, dump: Callable[[Any], str]) -> str:
    """`dump(tree)` with each Raw value written as its text: a placeholder (a plain word, which neither JSON
    nor YAML quotes differently from other words) is dumped, then replaced."""
    raws: list[Raw] = []

    def placeholders(node: Any) -> Any:
        if isinstance(node, Raw):
            raws.append(node)
            return f"RAWTOKEN{len(raws) - 1}X"
        if isinstance(node, dict):
            return {key: placeholders(value) for key, value in node.items()}
        if isinstance(node, list):
            return [placeholders(value) for value in node]
        return node

    text = dump(placeholders(tree))
    for index, raw in enumerate(raws):
        token = f"RAWTOKEN{index}X"
        text = text.replace(f'"{token}"', raw.text).replace(token, raw.text)
    return text


def dump_json(tree: Any) -> str:
    return json.dumps(tree, allow_nan=True)  # NaN and Infinity, as Python writes them


def dump_yaml(tree: Any) -> str:
    return yaml.safe_dump(tree, allow_unicode=True, sort_keys=False)


BAD_BYTES = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x00")
"""Bytes that are not UTF-8 (a lone 0xff, a broken sequence, an encoded surrogate, a five-byte form), and
NUL."""


@st.composite
def damaged(draw: st.DrawFn, text: str) -> bytes:
    """`text` as UTF-8, sometimes truncated, given a byte-order mark, or with bytes that are not UTF-8."""
    data = text.encode("utf-8", errors="surrogatepass")
    match draw(st.sampled_from(("as is", "as is", "truncated", "bom", "bad bytes"))):
        case "truncated":
            return data[: draw(st.integers(min_value=0, max_value=len(data)))]
        case "bom":
            return b"\xef\xbb\xbf" + data
        case "bad bytes":
            at = draw(st.integers(min_value=0, max_value=len(data)))
            return data[:at] + draw(st.sampled_from(BAD_BYTES)) + data[at:]
    return data


def file_contents(
    valid: st.SearchStrategy[Any], dump: Callable[[Any], str], raw: tuple[str, ...]
) -> st.SearchStrategy[bytes]:
    """A file made from a valid document: itself, mutated, damaged, or replaced by random bytes."""
    mutations = valid.flatmap(lambda document: mutated(document, raw))
    return st.one_of(
        valid.map(lambda document: dump(document).encode()),
        mutations.map(lambda tree: _serialize(tree, dump)).flatmap(damaged),
        st.binary(max_size=300),
    )


def dotted_paths(tree: Any) -> list[str]:
    return sorted(".".join(map(str, path)) for path in _paths(tree) if path)
