"""The URL scrubber (core/urls.py): userinfo and credential parameters out, everything else as written, in
time linear in the text's length.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_urls.py
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxbench.core.urls import scrub_document, scrub_url, scrub_urls


@pytest.mark.parametrize(
    ("url", "recorded"),
    [
        ("https://oauth2:TOKEN@github.com/google-deepmind/optax", "https://github.com/google-deepmind/optax"),
        ("https://TOKEN@github.com/org/repo.git#fix", "https://github.com/org/repo.git#fix"),
        ("https://x-access-token:ghs_abc@github.com/o/r", "https://github.com/o/r"),
        ("ssh://git@github.com/org/repo.git", "ssh://git@github.com/org/repo.git"),  # a user, not a secret
        ("ssh://git:hunter2@host/repo", "ssh://host/repo"),
        ("https://host/r?token=abc&ref=main", "https://host/r?ref=main"),
        ("https://host/r?access_token=abc", "https://host/r"),
        (
            "https://bucket.s3.amazonaws.com/x.tar?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F&"
            "X-Amz-Signature=ab12&X-Amz-Security-Token=zz&X-Amz-Expires=60",
            "https://bucket.s3.amazonaws.com/x.tar?X-Amz-Algorithm=AWS4&X-Amz-Expires=60",
        ),
        (
            "https://acct.blob.core.windows.net/c/b?sv=2022&sig=abc%3D",
            "https://acct.blob.core.windows.net/c/b?sv=2022",
        ),
        ("https://gitlab.example/r?private_token=glpat-x", "https://gitlab.example/r"),
        ("https://host/cb#access_token=abc&state=1", "https://host/cb#state=1"),
        ("https://github.com/jax-ml/jax", "https://github.com/jax-ml/jax"),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
        ("/srv/mirrors/optax", "/srv/mirrors/optax"),
        ("file:///srv/mirrors/optax", "file:///srv/mirrors/optax"),
        ("https://[::1/broken", "https://[::1/broken"),  # not even a URL urllib would parse
    ],
)
def test_scrub_url(url: str, recorded: str) -> None:
    assert scrub_url(url) == recorded
    assert scrub_url(recorded) == recorded


def test_scrub_urls_in_a_message_and_a_document() -> None:
    said = "fatal: 'https://a:b@h/x' not found; retry http://u:p@z/q?sig=1&x=2 or /local/path"
    assert scrub_urls(said) == "fatal: 'https://h/x' not found; retry http://z/q?x=2 or /local/path"
    document = {"components": {"optax": {"repository": "https://o:T@h/optax", "commit": "a" * 40}}, "n": [1]}
    assert scrub_document(document) == {
        "components": {"optax": {"repository": "https://h/optax", "commit": "a" * 40}},
        "n": [1],
    }


_URL_PARTS = st.sampled_from(
    ["https://", "ssh://", "a", "@", ":", "/", "?", "&", "#", "=", "token", "x", " "]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_URL_PARTS, max_size=30).map("".join))
def test_scrubbing_is_idempotent_and_leaves_no_password(text: str) -> None:
    once = scrub_urls(text)
    assert scrub_urls(once) == once
    for word in once.split():
        authority = word.partition("://")[2].split("/")[0].split("?")[0].split("#")[0]
        assert ":" not in authority.rpartition("@")[0], word  # no user:password left


@pytest.mark.parametrize(
    "text",
    ["a" * 1_000_000, "a://" * 250_000, "https://h/?" + "token=x&" * 125_000, "x://" + "@" * 1_000_000],
    ids=["one letter", "schemes", "parameters", "at signs"],
)
def test_a_megabyte_is_scrubbed_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    scrub_urls(text)
    scrub_url(text)
    assert time.perf_counter() - started < 5  # linear: a fraction of a second
