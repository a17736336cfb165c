"""No credential reaches a run's provenance: the environment allowlist and the credential rule, on tables of
real variable names and as properties.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_secrets.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import string
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import insert, select

from jaxbench.core.credentials import CREDENTIAL_NAME_PARTS, is_credential_value, looks_like_credential
from jaxbench.harness.provenance.record import (
    PERFORMANCE_ENV_NAMES,
    PERFORMANCE_ENV_PREFIXES,
    performance_env,
)
from jaxbench.results import schema, store, synthetic
from jaxbench.results.ingest import parse_file

# Real secret-bearing names: cloud, hub and CI credentials, and the ones once found in a stored result
# (JAX_AUTH_KEY, NCCL_ACCESS_KEY_ID, XLA_PASS), which share a performance prefix.
SECRET_NAMES = [
    "AWS_SECRET_ACCESS_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SESSION_TOKEN",
    "NCCL_ACCESS_KEY_ID",
    "JAX_AUTH_KEY",
    "XLA_PASS",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "NGC_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CUDA_DB_PASSWORD",
    "CUDA_REGISTRY_PASSWD",
    "NCCL_TLS_CERT",
    "NCCL_SECRETKEY",
    "XLA_APITOKEN",
    "JAX_SESSION_COOKIE",
    "TF_PRIVATE_KEY",
    "NVTE_AUTHORIZATION",
    "JAX_SENTRY_DSN",
]

# Real tuning variables, with values as they are set on GPU clusters: every one must be recorded.
TUNING_VARIABLES = {
    "XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true --xla_dump_to=/scratch/run-42/xla_dump",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": ".95",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    "NCCL_DEBUG": "INFO",
    "NCCL_IB_HCA": "mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1",
    "NCCL_IB_PKEY": "0",  # an InfiniBand partition index: "PKEY" is not "KEY"
    "NCCL_SOCKET_IFNAME": "eth0",
    "NCCL_NVLS_ENABLE": "0",
    "CUDA_VISIBLE_DEVICES": "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,MIG-1b2c3d4e-5f60-7182-93a4-b5c6d7e8",
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    "CUDA_MODULE_LOADING": "LAZY",
    "CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT": "0",
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    "JAX_ENABLE_X64": "1",
    "JAX_COMPILATION_CACHE_DIR": "/cache/jax/NVIDIA-H100-80GB-HBM3",
    "JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234",
    "TF_CPP_MIN_LOG_LEVEL": "0",
    "TF_CPP_VMODULE": "gpu_compiler=3",
    "NVTE_FUSED_ATTN": "1",
    "NVIDIA_TF32_OVERRIDE": "0",
    "LIBTPU_INIT_ARGS": "--xla_tpu_enable_async_collective_fusion=true",
}

# Fakes in each credential format (none is a live credential: AKIAIOSFODNN7EXAMPLE is AWS's documented
# example), as they would sit in a tuning variable's value.
SECRET_VALUES = [
    "https://ci-bot:hunter2@cache.example.com/jax",
    "Authorization: Bearer abcdef0123456789",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2c3D4e5" * 4,
    "github_pat_" + "11ABCDEFG0" * 4,
    "hf_" + "AbCdEfGhIj" * 4,
    "xoxb-1234567890-abcdefghij",
    "sk-" + "proj0123456789abcdefgh",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.signature",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "Zq8vT3kLmN0pR7sW2xY5bC9dF4gH6jK1aE3uI8oP",  # no known format: only its randomness gives it away
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_are_credentials_and_never_recorded(name: str) -> None:
    assert looks_like_credential(name, "x")
    assert performance_env({name: "x", "XLA_FLAGS": "--xla_foo=1"}) == {"XLA_FLAGS": "--xla_foo=1"}


def test_tuning_variables_are_all_recorded() -> None:
    assert performance_env({**TUNING_VARIABLES, "PATH": "/usr/bin", "HOME": "/root"}) == dict(
        sorted(TUNING_VARIABLES.items())
    )


@pytest.mark.parametrize("secret", SECRET_VALUES)
def test_a_credential_in_a_tuning_variable_drops_it(secret: str) -> None:
    environ = {"XLA_FLAGS": f"--xla_dump_to=/tmp/dump {secret}", "NCCL_DEBUG": "WARN"}
    assert performance_env(environ) == {"NCCL_DEBUG": "WARN"}


def test_a_result_written_with_a_secret_never_reaches_the_store(tmp_path: Path) -> None:
    # Result files written before the credential rule still carry what the old filter let through.
    document = synthetic.run_result(dt.date(2026, 11, 22), 0.5)
    document["provenance"]["env"] |= {"JAX_AUTH_KEY": "k", "NCCL_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE"}
    parsed = parse_file(synthetic.write(tmp_path, document))
    assert parsed.environment == {"XLA_FLAGS": document["provenance"]["env"]["XLA_FLAGS"]}


# --- properties ---------------------------------------------------------------------------------------------

_PREFIXES = st.sampled_from([*PERFORMANCE_ENV_PREFIXES, *(f"{n}_" for n in sorted(PERFORMANCE_ENV_NAMES))])
_NAME_PARTS = st.lists(st.from_regex(r"[A-Z0-9]{1,8}", fullmatch=True), max_size=3)
_CREDENTIAL_PARTS = st.sampled_from(sorted(CREDENTIAL_NAME_PARTS))
_VALUES = st.one_of(st.text(max_size=60), st.sampled_from([*SECRET_VALUES, *TUNING_VARIABLES.values()]))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.one_of(
            st.builds(lambda p, parts: p + "_".join(parts), _PREFIXES, _NAME_PARTS),
            st.builds(lambda p, c, rest: p + "_".join([c, *rest]), _PREFIXES, _CREDENTIAL_PARTS, _NAME_PARTS),
            st.sampled_from([*SECRET_NAMES, *TUNING_VARIABLES]),
        ),
        _VALUES,
        max_size=8,
    )
)
def test_no_kept_variable_matches_the_credential_rule(environ: dict[str, str]) -> None:
    for name, value in performance_env(environ).items():
        assert not looks_like_credential(name, value), name
        assert name.startswith(PERFORMANCE_ENV_PREFIXES) or name in PERFORMANCE_ENV_NAMES


@settings(max_examples=200, deadline=None)
@given(_PREFIXES, _NAME_PARTS, _CREDENTIAL_PARTS, _NAME_PARTS, _VALUES)
def test_a_credential_word_anywhere_in_an_allowlisted_name_drops_it(
    prefix: str, before: list[str], credential: str, after: list[str], value: str
) -> None:
    name = prefix + "_".join([*before, credential, *after])
    assert performance_env({name: value}) == {}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SECRET_VALUES), st.sampled_from(list(TUNING_VARIABLES.values())), st.booleans())
def test_a_known_credential_anywhere_in_a_value_is_found(secret: str, tuning: str, first: bool) -> None:
    assert is_credential_value(f"{secret} {tuning}" if first else f"{tuning} {secret}")


def test_secrets_stored_before_the_allowlist_are_scrubbed_by_the_migration(
    store_url: str, tmp_path: Path
) -> None:
    """A store at 0003 whose runs kept credentials in their environment (as ingest once did):
    upgrading drops exactly those variables and keeps the tuning ones."""
    engine = store.connect(store_url, migrate=False)
    store.upgrade(engine, "0003")
    run = parse_file(synthetic.write(tmp_path, synthetic.run_result(dt.date(2026, 11, 1), 0.5)))
    kept = {"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true", "NCCL_DEBUG": "WARN"}
    leaked = {"JAX_AUTH_KEY": "k3y", "NCCL_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "XLA_PASS": "hunter2"}
    columns = [
        f.name
        for f in dataclasses.fields(run)
        if f.name not in ("components", "results", "program", "profile")
    ]
    fields = {name: getattr(run, name) for name in columns}
    fields["environment"] = kept | leaked
    with engine.begin() as connection:
        connection.execute(insert(schema.Run.__table__).values(**fields, ingested_at=dt.datetime.now(dt.UTC)))
    store.upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(select(schema.Run.environment)).scalars().all() == [kept]


# --- linear time --------------------------------------------------------------------------------------------

MEGABYTE = 1_000_000
# Values a quadratic pattern chokes on: one long run (every start position scanned to its end), runs of a
# pattern's prefix that never complete, and a long random run (the entropy check's whole input).
LONG_VALUES = {
    "one letter": "a" * MEGABYTE,
    "a scheme with no end": "x://" + "a" * MEGABYTE,
    "schemes": "a://" * (MEGABYTE // 4),
    "JWT headers": "eyJ-" * (MEGABYTE // 4),
    "bearer and blanks": "bearer " + " " * MEGABYTE,
    "PEM headers": "-----BEGIN " * (MEGABYTE // 11),
    "mixed classes": "Ab1/" * (MEGABYTE // 4),
    "random": "".join(random.Random(0).choices(string.ascii_letters + string.digits + "/_", k=MEGABYTE)),
}


@pytest.mark.parametrize("value", LONG_VALUES.values(), ids=list(LONG_VALUES))
def test_a_megabyte_value_is_judged_in_linear_time(value: str) -> None:
    """The old rule took 0.6 s for 30 KB of one letter and grew with the square of the length (a megabyte:
    over ten minutes); linear, a megabyte takes a fraction of a second. The bound is generous on purpose."""
    started = time.perf_counter()
    looks_like_credential("XLA_FLAGS", value)
    assert time.perf_counter() - started < 5
