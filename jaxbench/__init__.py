"""jaxbench: the one installed package. Its layers are its subpackages (jaxbench.core up to jaxbench.nightly,
linked from the repository's top-level folders: docs/architecture.md); the modules here are the top floor,
the `jaxbench` command composed of every layer's subcommands (main, wiring) and the Python API (api). No
layer imports the top floor.

    jaxbench --help
"""
