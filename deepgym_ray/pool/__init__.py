"""The Ray layer, and the only package that imports Ray: a named pool of verifier actors shared
by every driver of a cluster, the ordered map that feeds it, and joining or starting Ray.

- :mod:`~deepgym_ray.pool.verifier_pool`: :class:`VerifierPool` and :func:`get_pool`;
- :mod:`~deepgym_ray.pool.actor`: the actor, holding a :class:`~deepgym_ray.scoring.Scorer`;
- :mod:`~deepgym_ray.pool.ordered_map`: one ``map`` call, ordered results, bounded in flight;
- :mod:`~deepgym_ray.pool.shares`: each actor's share of a call's ``max_parallel``;
- :mod:`~deepgym_ray.pool.liveness`: which actors are up, for one call;
- :mod:`~deepgym_ray.pool.slots`: a caller's cap on its runs at once on one actor;
- :mod:`~deepgym_ray.pool.env_refs`: environments put in the object store once per map;
- :mod:`~deepgym_ray.pool.connect`: joining a running cluster or starting an embedded Ray;
- :mod:`~deepgym_ray.pool.admin`: listing and stopping pools (``deepgym-ray pool``);
- :mod:`~deepgym_ray.pool.reaper`: nothing an embedded Ray started outlives its command.
"""

from deepgym_ray.pool.verifier_pool import VerifierPool, default_shape, ensure_ray, get_pool

__all__ = ["VerifierPool", "default_shape", "ensure_ray", "get_pool"]
