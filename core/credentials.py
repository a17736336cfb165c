"""Whether an environment variable looks like it holds a credential, judged by its name and by its value.

Run results, the store and the dashboard are published, so whatever records the environment
(`harness.provenance.performance_env`) drops such a variable whole. The rule errs towards dropping: a tuning
variable lost from a result costs a little traceability, a token kept in one is a leak.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_secrets.py
"""

from __future__ import annotations

import math
import re
from collections import Counter

CREDENTIAL_NAME_PARTS: frozenset[str] = frozenset(
    {
        *("KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "SECRET", "SECRETS", "BEARER", "JWT", "OTP"),
        *("PASS", "PASSWD", "PASSWORD", "PASSWORDS", "PASSPHRASE", "PWD"),
        *("CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "AUTHORIZATION", "SESSION", "COOKIE", "COOKIES"),
        *("PRIVATE", "CERT", "CERTS", "CERTIFICATE", "SIGNATURE", "SALT", "DSN"),
    }
)
"""Name parts (the upper-cased name split at every non-letter) that mark a credential: NCCL_ACCESS_KEY_ID,
JAX_AUTH_KEY, XLA_PASS. Whole parts only, so NCCL_IB_PKEY (an InfiniBand partition index) is no key."""

_CREDENTIAL_NAME_WORDS: tuple[str, ...] = (
    *("TOKEN", "SECRET", "PASSW", "PASSPHRASE", "CREDENTIAL", "APIKEY", "ACCESSKEY", "PRIVATEKEY"),
    "AUTHKEY",
)
"""Words unambiguous enough to count inside a part too, for names written without separators (NCCL_APIKEY,
XLA_AUTHTOKEN)."""

_NAME_PART_SEPARATOR = re.compile(r"[^A-Z]+")

# Each pattern is linear in the value's length, whatever the value (a 100 KB XLA_FLAGS, a megabyte of one
# letter): a match can only start at a fixed literal ("://", "eyJ", "gh") or where a run of its characters
# begins (the lookbehinds), and the possessive `++` never gives back what it took. A pattern that could
# start anywhere inside a long run and scan to its end (`[A-Za-z][A-Za-z0-9+.-]*://`) is quadratic.
_CREDENTIAL_VALUE = re.compile(
    "|".join(
        [
            r"(?<=[A-Za-z0-9+.-])://[^/?#\s@]++@",  # a URL with userinfo: https://user:token@host
            r"(?i:\b(?:bearer|basic)\s++[A-Za-z0-9._~+/=-]{8})",  # an HTTP Authorization header's value
            r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",  # an AWS access key id (long-lived or temporary)
            r"\bgh[pousr]_[A-Za-z0-9]{30}",  # a GitHub token: personal, OAuth, user, server, refresh
            r"\bgithub_pat_[A-Za-z0-9_]{30}",  # a fine-grained GitHub token
            r"\bhf_[A-Za-z0-9]{30}",  # a Hugging Face token
            r"\bxox[abposr]-[A-Za-z0-9-]{10}",  # a Slack token
            r"\bsk-[A-Za-z0-9_-]{20}",  # OpenAI-style and Anthropic API keys
            r"\bAIza[0-9A-Za-z_-]{35}",  # a Google API key
            # A JSON Web Token (a base64 JSON header), from the start of its run of base64url characters.
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8}[A-Za-z0-9_-]*+\.[A-Za-z0-9_-]{8}[A-Za-z0-9_-]*+\.",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----",  # a PEM private key
        ]
    )
)
"""Values with a known credential format, anywhere in the value (XLA_FLAGS is many words). A pattern that
ends in `{N}` needs no more than N characters to decide, so it never scans a long run to its end."""

_ALPHANUMERIC_RUN = re.compile(r"[A-Za-z0-9]{32,}")
RANDOM_RUN_MIN_BITS_PER_CHAR = 4.2
"""Shannon entropy of a run of letters and digits above which it is taken for a random token. 99% of random
32-character runs of [A-Za-z0-9] measure above 4.2 bits per character; long identifiers with upper case and
digits ("MyExperimentRun2026November22nd", 4.16) and hex digests (3.7, at most 4 by construction) stay
below. Runs are split at "/", "_", "-" and "=" so paths and XLA flag names never form one."""


def is_credential_name(name: str) -> bool:
    upper = name.upper()
    parts = set(_NAME_PART_SEPARATOR.split(upper))
    return bool(parts & CREDENTIAL_NAME_PARTS) or any(word in upper for word in _CREDENTIAL_NAME_WORDS)


def _bits_per_char(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(run: str) -> bool:
    mixes_classes = any(c.isupper() for c in run) and any(c.islower() for c in run)
    return (
        mixes_classes and any(c.isdigit() for c in run) and _bits_per_char(run) > RANDOM_RUN_MIN_BITS_PER_CHAR
    )


def is_credential_value(value: str) -> bool:
    return bool(_CREDENTIAL_VALUE.search(value)) or any(
        _looks_random(run) for run in _ALPHANUMERIC_RUN.findall(value)
    )


def looks_like_credential(name: str, value: str) -> bool:
    """Whether the variable `name`=`value` may hold a credential, by its name or by its value."""
    return is_credential_name(name) or is_credential_value(value)
