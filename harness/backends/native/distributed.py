"""Multi-process (multi-host) start-up: when to call jax.distributed.initialize, and with what.

One process per host (or per GPU) runs the same `jaxbench run`; they form one global mesh. Under SLURM or
Open MPI jax finds its peers itself; elsewhere set JAX_COORDINATOR_ADDRESS (host:port of process 0),
JAXBENCH_NUM_PROCESSES and JAXBENCH_PROCESS_ID in each process. Only process 0 writes the result.

    JAX_COORDINATOR_ADDRESS=10.0.0.1:1234 JAXBENCH_NUM_PROCESSES=2 JAXBENCH_PROCESS_ID=0 jaxbench run llama2
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from jaxbench.core.errors import InvalidInput

NUM_PROCESSES_ENV = "JAXBENCH_NUM_PROCESSES"
PROCESS_ID_ENV = "JAXBENCH_PROCESS_ID"
COORDINATOR_ENV = "JAX_COORDINATOR_ADDRESS"


def _count(environ: Mapping[str, str], name: str) -> int:
    value = environ.get(name, "1")
    try:
        return int(value)
    except ValueError as error:
        raise InvalidInput(f"environment variable {name}={value!r}: expected an integer") from error


def distributed_arguments(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """Keyword arguments for jax.distributed.initialize, or None for a single-process run."""
    if NUM_PROCESSES_ENV in environ or PROCESS_ID_ENV in environ:
        missing = [n for n in (COORDINATOR_ENV, NUM_PROCESSES_ENV, PROCESS_ID_ENV) if n not in environ]
        if missing:
            raise InvalidInput(f"a multi-process run needs {', '.join(missing)} set as well")
        processes, process_id = _count(environ, NUM_PROCESSES_ENV), _count(environ, PROCESS_ID_ENV)
        if not 0 <= process_id < processes:
            raise InvalidInput(
                f"{PROCESS_ID_ENV}={process_id} must be in [0, {NUM_PROCESSES_ENV}={processes})"
            )
        return {
            "coordinator_address": environ[COORDINATOR_ENV],
            "num_processes": processes,
            "process_id": process_id,
        }
    # Cluster launchers that jax detects on its own (jax._src.clusters): nothing to pass.
    if _count(environ, "SLURM_NTASKS") > 1 or _count(environ, "OMPI_COMM_WORLD_SIZE") > 1:
        return {}
    return None


def initialize(environ: Mapping[str, str]) -> None:
    arguments = distributed_arguments(environ)
    if arguments is not None:
        import jax

        jax.distributed.initialize(**arguments)


HOST_BYTES = 64
"""Host names travel as fixed-size byte arrays: every process must contribute the same shape."""


def gather_step_times(times: list[float]) -> list[tuple[str, list[float]]]:
    """Every process's (host, step times), by process index; a collective, so every process calls it, and
    only after a run that ended ok on all of them (they then ran the same number of steps)."""
    import numpy as np
    from jax.experimental import multihost_utils

    host = socket.gethostname().encode()[:HOST_BYTES].ljust(HOST_BYTES, b"\0")
    hosts = multihost_utils.process_allgather(np.frombuffer(host, dtype=np.uint8))
    gathered = multihost_utils.process_allgather(np.asarray(times, dtype=np.float32))
    return [
        (bytes(row).rstrip(b"\0").decode(errors="replace"), [float(t) for t in steps])
        for row, steps in zip(np.asarray(hosts), np.asarray(gathered), strict=True)
    ]
