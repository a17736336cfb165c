"""The pinned stack and its images: one manifest of pins (manifest.yaml), the image builds, pushes and
multi-architecture publishing, and the image launcher. See containers/README.md.

    jaxbench manifest show jax
"""

DEFAULT_REGISTRY = "ghcr.io/jaxbench"
"""Where images go unless GHCR_ORG or REGISTRY says otherwise."""
