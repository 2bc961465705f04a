"""The provider seam: the hooks are declared on SandboxProvider, and a wrapper forwards them all.

A wrapper that let a hook fall back to the base class's default would, for the local provider,
start solutions unconfined (``solution_launch`` -> ``{}``): ForwardingProvider forwards every
method and hook explicitly, and this test fails when one is added to the base and not there.
"""

from __future__ import annotations

from deepgym_ray.sandboxes import PROVIDERS, provider_class
from deepgym_ray.sandboxes.base import ForwardingProvider, SandboxProvider
from deepgym_ray.sandboxes.local import LocalProvider


def test_every_member_of_the_protocol_is_forwarded():
    declared = {name for name in vars(SandboxProvider)
                if not name.startswith("_") and name not in ("name", "preflight")}
    assert {"python", "io_bound", "solution_launch", "create", "run"} <= declared
    missing = declared - set(vars(ForwardingProvider))
    assert not missing, f"ForwardingProvider does not forward {sorted(missing)}"


def test_a_wrapped_local_provider_keeps_its_confinement(tmp_path):
    inner = LocalProvider()
    wrapped = ForwardingProvider(inner)
    env_sandbox = wrapped.create(_env())
    try:
        launch = wrapped.solution_launch(env_sandbox)
        assert launch == inner.solution_launch(env_sandbox) and launch  # not the {} default
        assert wrapped.python == inner.python and wrapped.io_bound is False
    finally:
        wrapped.destroy(env_sandbox)
        wrapped.close()


def test_every_registered_provider_is_a_sandbox_provider():
    for mode in PROVIDERS:
        assert issubclass(provider_class(mode), SandboxProvider)


def _env():
    from deepgym_ray.models import Environment

    return Environment(name="seam", verifier_code="return 1.0")
