"""One image builder per node: a task's image is built once per content hash on each node
that needs it, however many verifier actors there ask at once.

Each node gets a named actor (``deepgym-image-builder-<node id>``, pinned to that node);
every verifier actor on the node sends its recipes there. Inside, builds of the same tag wait
for one another (``images.ensure_image``), and builds of different tags run side by side.

Example:
    build = image_builder_for_this_node()   # in a verifier actor
    build(ImageRecipe(dockerfile="FROM deepgym/python:3-bookworm\\n"))   # 'deepgym-task:...'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from deepgym_ray.exceptions import DeepGymError
from deepgym_ray.repo_tasks import ImageRecipe

__all__ = ["NAMESPACE", "NodeImageBuilder", "image_builder_for_this_node", "node_builder"]

NAMESPACE = "deepgym_images"
PREFIX = "deepgym-image-builder"


@ray.remote(num_cpus=0, max_concurrency=32)
class NodeImageBuilder:
    """Builds task images on its node (see the module docstring)."""

    def __init__(self) -> None:
        self._api: Any = None

    def ensure(self, recipe: ImageRecipe) -> str:
        """The recipe's tag, its image built on this node first if missing."""
        from deepgym_ray.images import ensure_image

        if self._api is None:
            import docker

            self._api = docker.from_env(timeout=600).api
        return ensure_image(self._api, recipe)

    def builds(self) -> dict[str, int]:
        """How many builds of each tag this node's builder started (failed ones too)."""
        from deepgym_ray.images.build import BUILDS

        return dict(BUILDS)


def node_builder(node_id: str | None = None) -> Any:
    """The builder actor of ``node_id`` (this process's node by default), started if none."""
    node_id = node_id or ray.get_runtime_context().get_node_id()
    return NodeImageBuilder.options(
        name=f"{PREFIX}-{node_id}", namespace=NAMESPACE, get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
    ).remote()


def image_builder_for_this_node() -> Callable[[ImageRecipe], str]:
    """A function that builds a recipe's image on this node through its builder actor; the
    builder's own error (ImageBuildError) comes back as it was raised. The builder actor is
    looked up (or started) on the first call: a pool that never meets a recipe starts none."""
    handle: list[Any] = []

    def build(recipe: ImageRecipe) -> str:
        if not handle:
            handle.append(node_builder())
        try:
            return ray.get(handle[0].ensure.remote(recipe))
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, DeepGymError):
                raise exc.cause from None
            raise

    return build
