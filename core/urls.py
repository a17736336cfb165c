"""URLs without their credentials, as every record of one must hold them: a component's repository in a
result, the store, a manifest, an overlay or an issue; the repository of `--source COMPONENT=URL#REF`.

`scrub_url` drops a URL's userinfo (`https://oauth2:TOKEN@host`; an SSH user name such as `git@` stays,
it is no secret) and every query or fragment parameter whose name or value is a credential by
core/credentials.py's rule (`?token=`, `access_token`, `X-Amz-Signature`, Azure's `sig`). `scrub_urls` does
it to every URL inside a text (an error message). Both are linear in the text's length. The URL git needs
to clone stays in memory (containers.manifest.Component.clone_url) and is never written anywhere.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_urls.py
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus

from jaxbench.core.credentials import is_credential_name, is_credential_value

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*+://")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_URL_END = frozenset(" \t\r\n\f\v\"'<>`")
"""Where a URL inside a text ends: blanks and the quotes and brackets that surround one."""
SSH_SCHEMES = frozenset({"ssh", "git+ssh", "ssh+git"})
"""Schemes whose user name (`ssh://git@host/…`) is an account, not a secret: the key is elsewhere."""
CREDENTIAL_PARAMETERS = frozenset({"sig", "code"})
"""Parameter names that are credentials although core/credentials.py's name rule does not say so: Azure's
shared access signature, an OAuth authorization code."""


def _is_credential_parameter(parameter: str) -> bool:
    name, _, value = parameter.partition("=")
    name, value = unquote_plus(name), unquote_plus(value)
    return name.lower() in CREDENTIAL_PARAMETERS or is_credential_name(name) or is_credential_value(value)


def _without_credential_parameters(parameters: str) -> str:
    return "&".join(p for p in parameters.split("&") if not _is_credential_parameter(p))


@functools.lru_cache(maxsize=4096)
def scrub_url(url: str) -> str:
    """`url` without its userinfo and credential parameters; anything that is not a `scheme://` URL (a local
    path, git's `git@host:path`) as it is."""
    scheme = _SCHEME.match(url)
    if scheme is None:
        return url
    start = scheme.end()
    end = next((i for i in range(start, len(url)) if url[i] in "/?#"), len(url))
    userinfo, at, host = url[start:end].rpartition("@")
    public_user = scheme.group()[:-3].lower() in SSH_SCHEMES and ":" not in userinfo
    authority = url[start:end] if not at or public_user else host
    rest, hash_, fragment = url[end:].partition("#")
    path, question, query = rest.partition("?")
    query = _without_credential_parameters(query) if question else ""
    if hash_ and "=" in fragment:  # OAuth's implicit flow returns #access_token=…; a git ref has no "="
        fragment = _without_credential_parameters(fragment)
    # Cached above: ingest scrubs the same few URLs (repository, job, image) in every file of a batch.
    return (
        url[:start] + authority + path + ("?" + query if query else "") + ("#" + fragment if fragment else "")
    )


def scrub_urls(text: str) -> str:
    """`text` with every `scheme://…` URL in it scrubbed (`scrub_url`); a URL ends at a blank or a quote."""
    pieces: list[str] = []
    done = 0  # text[:done] is in pieces
    found = text.find("://")
    while found != -1:
        begin = found
        while begin > done and text[begin - 1] in _SCHEME_CHARS:
            begin -= 1
        while begin < found and not text[begin].isalpha():
            begin += 1
        end = found + 3
        while end < len(text) and text[end] not in _URL_END:
            end += 1
        pieces += [text[done:begin], scrub_url(text[begin:end])]
        done = end
        found = text.find("://", end)
    pieces.append(text[done:])
    return "".join(pieces)


def scrub_document(value: Any) -> Any:
    """A JSON or YAML document (a resolved manifest) with `scrub_urls` applied to every string in it."""
    if isinstance(value, str):
        return scrub_urls(value)
    if isinstance(value, Mapping):
        return {key: scrub_document(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_document(item) for item in value]
    return value
