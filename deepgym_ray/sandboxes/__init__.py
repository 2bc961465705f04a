"""Sandbox providers and :func:`make_provider`, which picks one by mode.

Example:
    provider = make_provider("local")
    provider.name
    # 'local'
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
from typing import Any

from deepgym_ray.config import MODES
from deepgym_ray.exceptions import DeepGymError, ProviderUnavailableError
from deepgym_ray.sandboxes.base import CancelSignal, CommandResult, Sandbox, SandboxProvider

__all__ = [
    "CancelSignal",
    "CommandResult",
    "ProviderUnavailableError",
    "Sandbox",
    "SandboxProvider",
    "check_mode",
    "is_io_bound",
    "make_provider",
    "provider_class",
    "resolve_mode",
]

logger = logging.getLogger(__name__)

#: Every provider, by mode: ``"module:Class"``, imported only when used. A new provider is one
#: file under ``sandboxes/`` and one line here.
PROVIDERS = {
    "local": "deepgym_ray.sandboxes.local:LocalProvider",
    "docker": "deepgym_ray.sandboxes.docker:DockerProvider",
    "daytona": "deepgym_ray.sandboxes.daytona:DaytonaProvider",
    "e2b": "deepgym_ray.sandboxes.e2b:E2BProvider",
    "modal": "deepgym_ray.sandboxes.modal:ModalProvider",
}
#: ``mode='auto'``'s order: the first cloud whose key is set (and whose SDK is installed:
#: else a warning, and the next), else the local sandbox. (mode, key variable, SDK module);
#: Modal's token may also be in Modal's config file (``modal token new``).
AUTO_ORDER = (("daytona", "DAYTONA_API_KEY", "daytona"), ("e2b", "E2B_API_KEY", "e2b"),
              ("modal", "MODAL_TOKEN_ID", "modal"))
_warned_missing_sdk: set[str] = set()


def resolve_mode(mode: str) -> str:
    """The concrete provider ``mode`` stands for. 'auto': Daytona when ``DAYTONA_API_KEY`` is
    set, else E2B when ``E2B_API_KEY`` is, else Modal when a Modal token is configured, else
    local (a cloud whose SDK is not installed is passed over with a warning)."""
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode != "auto":
        return mode
    for cloud, variable, module in AUTO_ORDER:
        if not _configured(cloud, variable):
            continue
        if _sdk_installed(module):
            return cloud
        if cloud not in _warned_missing_sdk:
            _warned_missing_sdk.add(cloud)
            logger.warning("%s is set but the '%s' SDK is not installed (pip install "
                           "'deepgym_ray[%s]'); not using %s", variable, module, cloud, cloud)
    return "local"


def _configured(cloud: str, variable: str) -> bool:
    """Whether ``cloud``'s key is set (Modal's token: also in its config file)."""
    if os.environ.get(variable):
        return True
    if cloud == "modal":
        from deepgym_ray.sandboxes.modal.options import token_configured

        return token_configured()
    return False


def _sdk_installed(module: str) -> bool:
    """Whether the SDK can be imported (found, not imported: importing it costs a second)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules: not installed
        return False


def provider_class(mode: str) -> type[SandboxProvider]:
    """The provider class ``mode`` stands for (see :data:`PROVIDERS`)."""
    concrete = resolve_mode(mode)
    module_name, _, class_name = PROVIDERS[concrete].partition(":")
    if importlib.util.find_spec(module_name) is None:
        raise ProviderUnavailableError(f"the {concrete!r} sandbox provider is not built "
                                       "in this version of deepgym_ray; use mode 'local'")
    return getattr(importlib.import_module(module_name), class_name)


def is_io_bound(mode: str) -> bool:
    """Whether ``mode``'s provider mostly waits on the network (its class says ``io_bound``),
    so the pool gives it many light actors with many runs each. False when unknown."""
    try:
        cls = provider_class(mode)
    except (DeepGymError, ImportError, ValueError):
        return False
    return bool(cls.io_bound)


def check_mode(mode: str, **options: Any) -> str:
    """The concrete mode ``mode`` stands for, once its provider has passed its preflight.

    Raises ``ValueError`` for an unknown mode or an option its provider does not take, and
    :class:`ProviderUnavailableError` (one line) when the provider cannot run here (not built,
    no engine, no SDK, no or a refused key). 'local' always can, and without options is not
    even imported here, so making a local client stays cheap.
    """
    concrete = resolve_mode(mode)
    if options:
        _check_options(concrete, provider_class(concrete), options)
    if concrete == "local":
        return concrete
    try:
        provider_class(concrete).preflight(**options)
    except ProviderUnavailableError:
        raise
    except Exception as exc:  # whatever the provider raised: one line, naming the mode
        text = " ".join(str(exc).split()) or type(exc).__name__
        if not isinstance(exc, DeepGymError):
            text = f"{type(exc).__name__}: {text}"
        raise ProviderUnavailableError(f"the {concrete!r} sandbox provider cannot run "
                                       f"here: {text}") from exc
    return concrete


def _check_options(mode: str, cls: type, options: dict[str, Any]) -> None:
    """A ValueError naming the options ``cls`` does not take (else each run of a batch would
    fail on them, in a pool actor); a provider taking ``**options`` checks its own."""
    params = inspect.signature(cls).parameters
    if any(param.kind is param.VAR_KEYWORD for param in params.values()):
        return
    unknown = sorted(set(options) - set(params))
    if not unknown:
        return
    from deepgym_ray.config import DeepGymConfig

    settings = [name for name in unknown if name in DeepGymConfig.model_fields]
    hint = (f"; {', '.join(settings)} {'is a setting' if len(settings) == 1 else 'are settings'}"
            f" of the client: DeepGym(config=DeepGymConfig({settings[0]}=...))"
            if settings else "")
    raise ValueError(f"the {mode!r} sandbox provider has no option "
                     f"{', '.join(map(repr, unknown))} (it takes {', '.join(params)}){hint}")


def make_provider(mode: str = "auto", **options: Any) -> SandboxProvider:
    """A new provider for ``mode`` ('local', 'docker', 'daytona', 'e2b', 'modal' or 'auto') with
    ``options``."""
    return provider_class(mode)(**options)
