"""Build a task's image from its recipe, once per content hash on this machine.

The tag is the recipe's content hash (``ImageRecipe.tag``): an image already there is used as
it is, and threads of one process that ask for the same recipe at once wait for the one build
(a node's builder actor makes that one build per node across processes). The build's output is
kept in a log file per hash (``build_log_path``), and each step is logged as it starts. A build
that fails raises :class:`ImageBuildError` with the end of its output: no run that needed the
image has a verdict.
"""

from __future__ import annotations

import collections
import io
import logging
import os
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from deepgym_ray import contract
from deepgym_ray.exceptions import SandboxError
from deepgym_ray.repo_tasks import ImageRecipe

__all__ = ["ImageBuildError", "build_log_path", "ensure_image", "ensure_pulled"]

logger = logging.getLogger(__name__)

BUILD_TIMEOUT = 3600.0
#: Builds this process started, by tag (a node's builder reports them: one per hash).
BUILDS: collections.Counter[str] = collections.Counter()
#: A failed build is not tried again for this long: the runs that wait for it, and those
#: that come soon after, get its error at once (a transient failure is tried again later).
FAILURE_MEMORY = 600.0
_failed: dict[str, tuple[float, str]] = {}
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


class ImageBuildError(SandboxError):
    """A task's image could not be built: the runs that needed it judged nothing (and are
    not retried on another actor: the same recipe fails the same way)."""

    error_type = contract.IMAGE_BUILD_ERROR


def build_log_path(recipe: ImageRecipe) -> Path:
    """Where the build output of ``recipe`` is kept (``DEEPGYM_IMAGE_LOGS``, else the user's
    cache directory)."""
    root = os.environ.get("DEEPGYM_IMAGE_LOGS") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "deepgym_ray", "image-builds")
    return Path(root) / f"{recipe.digest[:24]}.log"


def _exists(api: Any, tag: str) -> bool:
    import docker.errors

    try:
        api.inspect_image(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _context(recipe: ImageRecipe) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, content in [("Dockerfile", recipe.dockerfile.encode()),
                              *sorted(recipe.context.items())]:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), 0o644, 0
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def ensure_image(api: Any, recipe: ImageRecipe, timeout: float = BUILD_TIMEOUT) -> str:
    """The tag of ``recipe``'s image on the engine behind ``api``, built first if missing.
    Raises ImageBuildError with the build's last lines when it fails."""
    tag = recipe.tag
    with _locks_guard:
        lock = _locks.setdefault(tag, threading.Lock())
    with lock:
        failed = _failed.get(tag)
        if failed is not None and time.monotonic() - failed[0] < FAILURE_MEMORY:
            raise ImageBuildError(failed[1])
        if _exists(api, tag):
            return tag
        try:
            _build(api, recipe, tag, timeout)
        except ImageBuildError as exc:
            _failed[tag] = (time.monotonic(), str(exc))
            raise
        _failed.pop(tag, None)
    return tag


def _build(api: Any, recipe: ImageRecipe, tag: str, timeout: float) -> None:
    log_path = build_log_path(recipe)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    BUILDS[tag] += 1
    logger.info("building image %s (log: %s)", tag, log_path)
    error: str | None = None
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            for item in api.build(fileobj=io.BytesIO(_context(recipe)), custom_context=True,
                                  tag=tag, rm=True, forcerm=True, decode=True,
                                  buildargs=dict(recipe.build_args) or None, timeout=timeout):
                text = item.get("stream") or item.get("status") or ""
                if text:
                    log.write(text if text.endswith("\n") else text + "\n")
                    if text.startswith("Step "):
                        logger.info("%s: %s", tag, text.strip())
                if item.get("error"):
                    error = str(item["error"]).strip()
                    log.write(f"ERROR: {error}\n")
        except Exception as exc:  # noqa: BLE001 - the engine failed the call itself
            error = f"{type(exc).__name__}: {str(exc)[:500]}"
            log.write(f"ERROR: {error}\n")
    if error is None and not _exists(api, tag):
        error = "the build ended without an image"
    if error is not None:
        tail = "".join(log_path.read_text(encoding="utf-8").splitlines(keepends=True)[-12:])
        raise ImageBuildError(f"building the task image {tag} failed: {error}\n"
                              f"(build log: {log_path})\n{tail.rstrip()}")
    logger.info("built image %s in %.0fs", tag, time.monotonic() - started)


def ensure_pulled(api: Any, image: str) -> str:
    """``image`` as named, pulled first (once per name at a time) when the engine lacks it:
    a prebuilt task image from a registry the cluster reaches. SandboxError naming it when it
    can be neither found nor pulled."""
    with _locks_guard:
        lock = _locks.setdefault(f"pull:{image}", threading.Lock())
    with lock:
        if _exists(api, image):
            return image
        logger.info("pulling image %s", image)
        try:
            api.pull(image)
        except Exception as exc:  # noqa: BLE001 - no registry, no such image, no network
            raise SandboxError(f"the task image {image!r} is not on this engine and could not "
                               f"be pulled ({str(exc).splitlines()[0][:200]}); build it or "
                               "give the task an image recipe") from None
    return image
