"""Fixtures of the integration tests."""

from __future__ import annotations

import uuid

import pytest
import yaml


@pytest.fixture(scope="module")
def pool_config_file(ray_local, tmp_path_factory, request):
    """A DeepGymConfig YAML for a Ray pool of this module's own (two actors, real local
    sandboxes), shut down after the module: for code that takes a config file by its path
    (``DEEPGYM_CONFIG``, a task's settings)."""
    from deepgym_ray.client import DeepGym
    from deepgym_ray.config import DeepGymConfig, PoolConfig
    from deepgym_ray.pool import get_pool

    module = request.module.__name__.rpartition(".")[2].removeprefix("test_")
    config = DeepGymConfig(mode="local", backend="ray", pool=PoolConfig(
        name=f"{module}-{uuid.uuid4().hex[:8]}", actors=2, actor_concurrency=4,
        num_cpus_per_actor=0, max_retries=1))
    path = tmp_path_factory.mktemp("pool-config") / "deepgym.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    yield str(path)
    get_pool(DeepGym(config=config)).shutdown()
