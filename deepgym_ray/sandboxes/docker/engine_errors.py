"""The SandboxError that stands for a Docker SDK or transport error (the reward contract:
an engine that cannot be reached or refuses a call never judged the answer)."""

from __future__ import annotations

from deepgym_ray.exceptions import (
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
    SandboxError,
)

__all__ = ["BUILD_SCRIPT", "engine_error"]

BUILD_SCRIPT = "scripts/build_docker_image.sh"


def engine_error(exc: BaseException, image: str | None = None) -> SandboxError:
    """The SandboxError that stands for an SDK or transport error."""
    import docker.errors
    import requests.exceptions

    text = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
    if isinstance(exc, docker.errors.ImageNotFound) or (
            isinstance(exc, docker.errors.NotFound) and image and "image" in text.lower()):
        return SandboxError(f"the Docker image {image!r} is not on this engine; build it "
                            f"offline with `bash {BUILD_SCRIPT} {image}` (or pull it)")
    if isinstance(exc, docker.errors.APIError) and exc.status_code:
        return ProviderHTTPError(exc.status_code, f"Docker engine: {text}")
    if isinstance(exc, requests.exceptions.Timeout):
        return ProviderTimeoutError(f"the Docker engine did not answer in time: {text}")
    if isinstance(exc, (requests.exceptions.ConnectionError, ConnectionError, OSError,
                        docker.errors.DockerException)):
        return ProviderConnectionError(f"the Docker engine is not reachable: {text}")
    return ProviderError(f"Docker engine call failed: {type(exc).__name__}: {text}")
