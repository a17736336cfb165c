"""Run by a framework's own interpreter, never imported by the harness: what that environment holds and
what it runs on, as one JSON object on stdout. Standard library and jax only (the framework's jax).

    .venv-maxtext/bin/python probe.py jax jaxlib maxtext ...
"""

import importlib.metadata
import json
import platform
import socket
import sys


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def main() -> None:
    distributions = sys.argv[1:]
    import jax

    devices = jax.devices()
    report = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "prefix": sys.prefix,
        "versions": {name: version(name) for name in distributions},
        "devices": {
            "platform": " + ".join(dict.fromkeys(d.platform for d in devices)),
            "kind": " + ".join(dict.fromkeys(d.device_kind for d in devices)),
            "count": len(devices),
            "local_count": len(jax.local_devices()),
            "process_count": jax.process_count(),
            "hostname": socket.gethostname(),
        },
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
