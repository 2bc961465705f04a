"""What the Docker provider does for repository tasks (``scoring/patch_judging.py`` and
``scoring/terminal_judging.py``): the task's image, built where needed, and fresh containers of
it (``task_container.TaskContainers``). A mixin of ``DockerProvider``, whose engine client,
lock, teardown and labels it uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.models import Environment
from deepgym_ray.repo_tasks import ImageRecipe
from deepgym_ray.sandboxes.docker.engine_errors import engine_error
from deepgym_ray.sandboxes.docker.task_container import TaskContainer, TaskContainers, TaskLimits

__all__ = ["RepositoryTasks"]


class RepositoryTasks:
    """Repository-task support for ``DockerProvider`` (see the module docstring)."""

    image: str
    image_builder: Callable[[ImageRecipe], str] | None
    settings: Any
    _tasks: TaskContainers | None
    _images_found: dict[str, str]

    def task_image(self, env: Environment) -> str:
        """The image a repository task runs in: ``env.image`` as named (pulled if missing), or
        its recipe's, built on this node first if missing (by ``image_builder`` when the pool
        set one: one build per node). ImageBuildError when the build fails. An image found
        once is not looked for again by this provider (no engine or builder call per run)."""
        key = env.image_recipe.tag if env.image_recipe is not None else env.image or self.image
        found = self._images_found.get(key)
        if found is not None:
            return found
        if env.image_recipe is None:
            from deepgym_ray.images import ensure_pulled

            found = ensure_pulled(self._client(), key)
        elif self.image_builder is not None:
            found = self.image_builder(env.image_recipe)
        else:
            from deepgym_ray.images import ensure_image

            found = ensure_image(self._client(), env.image_recipe)
        self._images_found[key] = found
        return found

    def start_task_container(self, image: str, limits: TaskLimits | None = None
                             ) -> TaskContainer:
        """A fresh container of ``image`` for one run; give it back with
        ``end_task_container``."""
        api = self._client()
        with self._lock:
            if self._closed:
                raise SandboxError("the docker provider is closed")
            self._started_any = True  # close() sweeps by label what it kept no handle on
            if self._tasks is None:
                self._tasks = TaskContainers(api, self.settings.labels, self._teardown)
        try:
            return self._tasks.take(image, limits or TaskLimits())
        except Exception as exc:  # noqa: BLE001 - SDK and transport errors
            raise engine_error(exc, image) from exc

    def end_task_container(self, box: TaskContainer) -> None:
        """Remove a task container after its run (on a background thread)."""
        self._tasks.give_back(box)

