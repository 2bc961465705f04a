"""Docker-mode clients for tests: the locally built image, and why a test must skip.

``make_docker_client`` is what any provider-agnostic battery needs to point itself at docker
(``tests/conftest.py``'s ``docker_client`` fixture uses it): a real engine, the image that
``scripts/build_docker_image.sh`` builds offline, and a pool of its own.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

TEST_IMAGE = os.environ.get("DEEPGYM_DOCKER_IMAGE", "deepgym/python:3-bookworm")


def docker_skip_reason(image: str = TEST_IMAGE) -> str | None:
    """Why docker tests cannot run here (no SDK, no engine, no image), or None when they can."""
    from deepgym_ray.exceptions import SandboxError
    from deepgym_ray.sandboxes.docker import DockerProvider

    try:
        DockerProvider.preflight()
    except SandboxError as exc:
        return str(exc)
    import docker

    try:
        docker.from_env(timeout=10).images.get(image)
    except Exception as exc:  # noqa: BLE001 - any failure means the image cannot be used
        return (f"the docker test image {image!r} is missing ({type(exc).__name__}); "
                f"build it with `bash scripts/build_docker_image.sh {image}`")
    return None


def make_docker_client(*, actors: int = 2, concurrency: int = 2, max_retries: int = 2,
                       backend: str = "ray", pool_name: str | None = None,
                       **provider_options: Any) -> Any:
    """A DeepGym client in docker mode on TEST_IMAGE with a pool of its own (a fresh name)."""
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig, PoolConfig

    pool = PoolConfig(name=pool_name or f"docker-{uuid.uuid4().hex[:8]}", actors=actors,
                      actor_concurrency=concurrency, num_cpus_per_actor=0,
                      max_retries=max_retries)
    options = {"image": TEST_IMAGE, **provider_options}
    config = DeepGymConfig(mode="docker", backend=backend, provider_options=options,
                           max_parallel=actors * concurrency, pool=pool)
    return DeepGym(config=config)


def shutdown_pool(client: Any) -> None:
    """Kill the client's pool actors (detached: they outlive the test otherwise)."""
    from deepgym_ray.pool import get_pool

    get_pool(client).shutdown()
