"""Which failed registry commands (`docker push`, `pull`, `manifest inspect`, `create`, `push`) are tried
again: those whose error the registry or the network may not repeat (a reset or refused connection, a TLS
handshake timeout, a 5xx, `toomanyrequests`), never one that names a refusal or a missing image, which a
second attempt would only repeat later. Pure: the command's stderr in, a decision out; containers.docker
acts on it through core.retries.

    pytest tests/containers/test_registry_retries.py
"""

from __future__ import annotations

from jaxbench.core.retries import Retries

RETRIES = Retries(attempts=4, total_s=1800.0, first_wait_s=2.0, max_wait_s=30.0)
"""A registry command: four attempts, waits of about 2, 4 and 8 s (at most 30 s each), none after half an
hour (a large image's push takes minutes: a retry resumes it, the layers already sent stay sent)."""

PERMANENT = (
    "unauthorized",
    "authentication required",
    "denied",  # "denied: requested access to the resource is denied", "pull access denied"
    "forbidden",
    "insufficient_scope",
    "manifest unknown",
    "no such manifest",
    "name unknown",
    "not found",
    "does not exist",  # "repository does not exist", "An image does not exist locally with the tag"
    "no such image",
    "invalid reference format",
)
"""Words of Docker's and the registries' errors that another attempt would get again (OCI distribution
spec error codes UNAUTHORIZED, DENIED, MANIFEST_UNKNOWN, NAME_UNKNOWN, and the CLI's own)."""

TRANSIENT = (
    "connection reset",
    "connection refused",
    "broken pipe",
    "unexpected eof",
    ": eof",
    "i/o timeout",
    "tls handshake timeout",
    "timeout exceeded",  # "Client.Timeout exceeded while awaiting headers"
    "context deadline exceeded",
    "temporary failure in name resolution",
    "toomanyrequests",
    "too many requests",
    "500 internal server error",
    "502 bad gateway",
    "503 service unavailable",
    "504 gateway timeout",
    "received unexpected http status: 5",
)
"""Words of errors the network or the registry may not repeat: Go's net errors as the docker CLI prints
them, HTTP 429 (the distribution spec's TOOMANYREQUESTS) and 5xx."""


def transient(stderr: str) -> bool:
    """Whether a failed registry command's error (its stderr) is worth another attempt: a transient error
    named, and no permanent one (a 503 that also says `unauthorized` stays a refusal)."""
    text = stderr.lower()
    if any(word in text for word in PERMANENT):
        return False
    return any(word in text for word in TRANSIENT)
