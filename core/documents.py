"""JSON and YAML documents that a user hands in (result files, recipes, manifests, `--set` values), parsed so
that every way their text can be wrong is one InvalidInput that names the source: beside the parsers' own
errors, a number of over 4,300 digits and a date like 2026-13-45 (ValueError), nesting deep enough to
exhaust Python's stack (RecursionError), a string holding a lone surrogate ("\\ud800", which JSON and
YAML escapes can spell but which no UTF-8 file, hash or database can hold), and YAML aliases that expand a
short text into millions of nodes (a "billion laughs") or into a document that contains itself.

    parse_json(path.read_bytes(), str(path))
    parse_yaml(read_text(path), str(path))
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from yaml.composer import ComposerError

from jaxbench.core.errors import InvalidInput, not_utf8, one_line

MAX_DEPTH = 64
"""How deeply lists and mappings may nest in a document. Ours nest five levels at most; a deeper one would
only exhaust the stack of the recursive code that reads it later (deepcopy, pydantic, our walkers)."""

PARSE_FAILURES = (ValueError, OverflowError, RecursionError)
"""What parsing raises beside the parsers' own errors (json's JSONDecodeError is a ValueError): digits beyond
int()'s limit, a date out of range, nesting beyond the stack."""


def parse_json(data: str | bytes, where: str) -> Any:
    """The JSON document in `data` (bytes are read as UTF-8), with Python's extensions (NaN, Infinity) as
    json reads them: a caller that wants finite numbers checks them."""
    try:
        document = json.loads(data)
    except UnicodeDecodeError as error:  # json.loads decodes bytes itself
        raise not_utf8(error, where) from error
    except PARSE_FAILURES as error:
        raise InvalidInput(f"{where}: not valid JSON: {_parse_problem(error)}") from error
    check_document(document, where, texts=_may_hold_surrogates(data))
    return document


_SURROGATE_IN_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE_IN_TEXT = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


def _may_hold_surrogates(data: str | bytes) -> bool:
    """Whether a string parsed from this JSON text can hold a lone surrogate. json.loads decodes bytes with
    "surrogatepass" (and reads UTF-16 and UTF-32 too), so in UTF-8 bytes one comes from a \\uD800-\\uDFFF
    escape or from its own three bytes (ED A0-BF ..); text can hold one itself. One scan of the text in C,
    where walking every string of a document in Python cost more than parsing it."""
    if isinstance(data, bytes):
        return json.detect_encoding(data) != "utf-8" or _SURROGATE_IN_BYTES.search(data) is not None
    return _SURROGATE_IN_TEXT.search(data) is not None


MAX_ALIASED_NODES = 10_000
"""How many nodes YAML aliases may add to a document, each alias counted as a copy of what it names. Aliases
of aliases name exponentially many (ten levels of ten: 10**10), and what reads the document after the
parser (a deep merge, pydantic, a message quoting the value) walks every copy. Our recipes use none."""


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader (no Python objects), refusing a document whose aliases add more than
    MAX_ALIASED_NODES nodes, or make a collection contain itself: before anything is constructed."""

    def compose_document(self) -> yaml.Node | None:
        root = super().compose_document()
        if root is not None:
            check_aliases(root)
        return root


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def check_aliases(root: yaml.Node) -> None:
    """yaml.composer.ComposerError where aliases expand the node graph under `root` by more than
    MAX_ALIASED_NODES nodes, or where a collection contains itself. One pass over the distinct nodes (an
    alias is the node it names): each node's expanded size is computed once, from its children's."""
    sizes: dict[int, int] = {}
    inside: set[int] = set()  # the collections on the path from the root to the node at hand
    pending: list[tuple[yaml.Node, bool]] = [(root, False)]
    while pending:
        node, counted = pending.pop()
        if counted:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in _children(node))
            inside.discard(id(node))
        elif id(node) in inside:
            raise ComposerError(
                None,
                None,
                "an alias names a collection it is inside of; expected a finite document",
                node.start_mark,
            )
        elif id(node) not in sizes:
            inside.add(id(node))
            pending.append((node, True))
            pending.extend((child, False) for child in _children(node))
    added = sizes[id(root)] - len(sizes)
    if added > MAX_ALIASED_NODES:
        raise ComposerError(
            None,
            None,
            f'its aliases expand it by more than {MAX_ALIASED_NODES:,} nodes (a "billion laughs"); '
            "expected a document that repeats less",
        )


def parse_yaml(text: str, where: str) -> Any:
    """The YAML document in `text`, read by PyYAML's safe loader (no Python objects), aliases bounded
    (BoundedLoader)."""
    try:
        document = yaml.load(text, Loader=BoundedLoader)
    except yaml.MarkedYAMLError as error:
        raise InvalidInput(f"{where}: not valid YAML: {yaml_problem(error)}") from error
    except (yaml.YAMLError, *PARSE_FAILURES) as error:
        raise InvalidInput(f"{where}: not valid YAML: {_parse_problem(error)}") from error
    check_document(document, where)
    return document


def yaml_problem(error: yaml.MarkedYAMLError) -> str:
    """PyYAML's message in one line: where and what, without the quoted source and caret lines that its own
    message spreads over four."""
    parts = []
    if error.problem_mark is not None:
        parts.append(f"line {error.problem_mark.line + 1}, column {error.problem_mark.column + 1}: ")
    parts.append(error.problem or error.context or "cannot be parsed")
    if error.context and error.problem:
        context_at = error.context_mark
        where = (
            "" if context_at is None else f" at line {context_at.line + 1}, column {context_at.column + 1}"
        )
        parts.append(f" ({error.context}{where})")
    return "".join(parts)


def _parse_problem(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return f"nested too deeply (expected at most {MAX_DEPTH} levels)"
    return one_line(str(error))


def check_document(document: Any, where: str, *, texts: bool = True) -> None:
    """InvalidInput where `document` nests deeper than MAX_DEPTH or holds a string (a key or a value) that is
    not valid Unicode (`texts`: False where the source cannot hold one). A loop, not recursion: the document
    may be as deep as the parser's stack allowed. Each list or mapping is walked once, however many YAML
    aliases name it (aliases of aliases make exponentially many paths)."""
    wanted = (str, dict, list) if texts else (dict, list)
    pending: list[tuple[Any, int]] = [(document, 0)]
    walked: set[int] = set()
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _check_text(value, where)
            continue
        if not isinstance(value, dict | list) or id(value) in walked:
            continue
        walked.add(id(value))
        if depth >= MAX_DEPTH:
            raise InvalidInput(
                f"{where}: nested more than {MAX_DEPTH} levels deep; expected a flatter document"
            )
        items = [*value, *value.values()] if isinstance(value, dict) else value
        # Numbers (a run's step times, its loss curve) hold nothing to check: never pushed.
        pending.extend((item, depth + 1) for item in items if isinstance(item, wanted))


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = text[error.start : error.end]
        raise InvalidInput(
            f"{where}: the text {text[max(0, error.start - 20) : error.end + 20]!r} holds {bad!r}, "
            "a lone surrogate, which is not valid Unicode; expected text a UTF-8 file can hold"
        ) from error
