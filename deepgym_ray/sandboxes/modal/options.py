"""The Modal provider's settings, the SDK (loaded on first use), its client, and the token's
check.

Modal's client takes its server from its configuration (``MODAL_SERVER_URL``, else Modal's
own) and its token from options, ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET``, or the
active profile of Modal's config file (``~/.modal.toml``, what ``modal token new`` writes).

Example:
    >>> ModalOptions(token_id="ak-1", token_secret="as-1", lifetime=600).lifetime
    600
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field

from deepgym_ray.exceptions import SandboxError
from deepgym_ray.sandboxes.modal.calls import bounded
from deepgym_ray.sandboxes.remote.options import RemoteOptions, check_answers

__all__ = ["ModalOptions", "check_access", "load_sdk", "make_client", "token_configured"]

_INSTALL_HINT = "pip install 'deepgym_ray[modal]'"
#: The version whose wire protocol this provider and its tests speak (Modal's is private).
SDK_VERSION = "1.6.4"


class ModalOptions(RemoteOptions):
    """The provider's settings; unset connection fields come from Modal's configuration."""

    token_id: str | None = None
    token_secret: str | None = None
    server_url: str | None = Field(default=None, description="Modal's API address "
                                   "(MODAL_SERVER_URL; unset: Modal's own)")
    app_name: str = Field(default="deepgym", min_length=1, max_length=64,
                          pattern=r"^[A-Za-z0-9._-]+$", description="the Modal app the "
                          "sandboxes belong to (made on first use)")
    image: str = Field(default="python:3.11-slim", min_length=1, description="a registry "
                       "image for environments that name none (it needs python3)")
    lifetime: int = Field(default=900, ge=60, le=86400, description="seconds a sandbox lives "
                          "(Modal ends it then, and a crashed actor's with it); at least "
                          "eight times the environment's timeout, whatever is set here")
    cpu: float = Field(default=1.0, gt=0, le=64)
    memory_mb: int = Field(default=2048, ge=256)

    def resolved(self) -> ModalOptions:
        env = os.environ
        return self.model_copy(update={
            "token_id": self.token_id or env.get("MODAL_TOKEN_ID") or None,
            "token_secret": self.token_secret or env.get("MODAL_TOKEN_SECRET") or None,
            "server_url": self.server_url or env.get("MODAL_SERVER_URL") or None,
        })


def token_configured() -> bool:
    """Whether a Modal token is set (``MODAL_TOKEN_ID``, or a token in the active profile of
    Modal's config file), without importing the SDK: what ``mode='auto'`` asks."""
    if os.environ.get("MODAL_TOKEN_ID"):
        return True
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    path = Path(os.environ.get("MODAL_CONFIG_PATH") or Path.home() / ".modal.toml")
    try:
        profiles = tomllib.loads(path.read_text())
    except (OSError, ValueError):
        return False
    wanted = os.environ.get("MODAL_PROFILE")
    chosen = [p for name, p in profiles.items() if isinstance(p, dict) and (
        name == wanted if wanted else p.get("active") or len(profiles) == 1)]
    return any(p.get("token_id") for p in chosen)


def load_sdk() -> Any:
    try:
        import modal
    except ImportError as exc:
        raise SandboxError(f"the Modal provider needs the 'modal' SDK ({_INSTALL_HINT}): "
                           f"{exc}") from None
    return modal


def make_client(opts: ModalOptions) -> Any:
    """A Modal client with the options' token (else Modal's configured one), on the options'
    server. Modal's client reads its server only from its configuration: a ``server_url``
    option is put there, for this process (one Modal server per process)."""
    sdk = load_sdk()
    from modal.config import config

    if opts.server_url and config.get("server_url") != opts.server_url:
        config.override_locally("server_url", opts.server_url)
    if opts.token_id and opts.token_secret:
        connect, args = sdk.Client.from_credentials, (opts.token_id, opts.token_secret)
    elif token_configured():
        connect, args = sdk.Client.from_env, ()
    else:
        raise SandboxError("Modal needs a token: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, "
                           "run `modal token new`, or pass token_id and token_secret")
    # The client connects at once, and tries for a minute where nothing answers.
    return bounded(connect, *args, deadline=opts.call_timeout, what="connect to Modal")


def check_access(opts: ModalOptions) -> None:
    """Raise SandboxError with one clear line when the SDK is missing, no token is set, or
    Modal refuses it (the provider's preflight); return quietly when Modal answers."""
    where = opts.server_url or "Modal's API"

    def look_up_the_app() -> None:
        sdk, client = load_sdk(), make_client(opts)
        bounded(sdk.App.lookup, opts.app_name, create_if_missing=True, client=client,
                deadline=opts.call_timeout, what="look up the app")

    check_answers("Modal", where, "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET", look_up_the_app)
