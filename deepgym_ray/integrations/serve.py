"""An HTTP reward service on Ray Serve, in front of the shared verifier pool.

    deepgym-ray serve --env NAME | --mixed FILE.yaml [--host H] [--port N]

Endpoints (one deployment, ``RewardService``):

- ``POST /get_reward`` (also ``POST /``): OpenRLHF's remote reward protocol. The body is
  ``{"query": [prompt + response], "prompts": [prompt], "labels": [label]}`` (OpenRLHF sends one
  sample per request); the answer is ``{"rewards": [...], "scores": [...], "extra_logs":
  {"has_verdict": [...]}}``. The label routes the sample (an environment's name, a suite member
  or a task id, by MixedEnvironment's rules as ``benchmark`` then ``task_id``) unless the service
  has one environment; there a label naming another environment is refused (400), any other
  label (a dataset's ground truth, say) is left alone. The response is what follows the
  prompt's text in ``query``; OpenRLHF decodes with its special tokens, so the end-of-turn
  token after the answer is dropped (the common chat templates' tokens, and the model's own
  with ``--tokenizer``). OpenRLHF has no notion of "no verdict": such a sample gets
  ``no_verdict_score`` (a setting, default 0.0) and ``has_verdict`` 0 in ``extra_logs``.
  A malformed request (lengths that differ, wrong types, a label that routes nowhere) gets
  HTTP 400 with ``{"error": ...}`` saying what was wrong: OpenRLHF's client retries anything
  else.
- ``POST /score``: ``{"completions": [...], "env_name": NAME or [...], <other routing fields>}``
  -> ``{"rewards": [float or null], "has_verdict": [...], "error_type": [...], "env_name":
  [...]}``; ``rewards`` follow the reward contract (null where there is no verdict).
- ``GET /stats``: how requests were batched (``maps``, ``items``, ``batch_sizes``) and the
  no-verdict counts.
- ``/v1/sessions``: agent episodes (:mod:`~deepgym_ray.integrations.serve_sessions`).

A body larger than ``max_body_mb`` (``--max-body-mb``, default 64 MiB) is HTTP 413, refused
before it is read; a body that is not JSON is HTTP 400.

Every sample of every request goes through one ``serve.batch`` queue: concurrent single-sample
requests leave it as one pool map of up to ``max_batch_size`` samples, so the pool is fed in
batches. A request whose metadata routes nowhere gets HTTP 400 naming the problem; the other
samples of its batch are scored as usual.

Example:
    $ deepgym-ray serve --mixed configs/mixed.yaml --port 8000 --no-verdict-score 0.0
    $ curl -s localhost:8000/get_reward -d '{"query": ["..."], "prompts": [""],
           "labels": ["coin_change"]}'
"""

from __future__ import annotations

import logging
import time

from deepgym_ray.integrations.serve_settings import ServeSettings

__all__ = ["ServeConflict", "ServeSettings", "ServiceStopped", "service_problem",
           "start_service", "stop_service", "watch_service"]

logger = logging.getLogger(__name__)

APP_NAME = "deepgym-reward"


class ServeConflict(ValueError):
    """The cluster's Ray Serve cannot take this service as asked (another port, or a reward
    service already deployed): refused before anything is deployed."""


def start_service(settings: ServeSettings, *, blocking: bool = False) -> str:
    """Start the service on the cluster (Ray is joined or started) and return its base URL.
    ``blocking`` serves until interrupted (or until the service dies: ServiceStopped), then
    stops it (:func:`stop_service`). Raises :class:`ServeConflict` before deploying anything
    when Ray Serve already runs on the cluster on another port (a cluster has one HTTP port
    for Serve), or when a reward service is deployed there already."""
    from ray import serve

    from deepgym_ray.integrations.serve_app import MAX_CONCURRENT_BATCHES, RewardService
    from deepgym_ray.pool.connect import ensure_ray

    ensure_ray()
    _check_no_conflict(settings)
    deployment = serve.deployment(
        RewardService,
        name="RewardService",
        max_ongoing_requests=max(1024, settings.max_batch_size * MAX_CONCURRENT_BATCHES),
        ray_actor_options={"num_cpus": 0},  # it waits on the pool; the pool's actors work
        # A line per request at INFO, forwarded to the command's console: /stats counts them.
        logging_config={"enable_access_log": False},
    )
    # Ray Serve gives its HTTP proxies a fixed 60 s to come up; with every core kept busy a
    # proxy took longer, and the start failed while the proxy was still on its way. What Ray
    # started goes on starting: a second start joins it, and the wait is ours, up to
    # start_timeout_s. (Running the application again would replace its replica.)
    deadline = time.monotonic() + settings.start_timeout_s
    http = {"host": settings.host, "port": settings.port}
    try:
        serve.start(http_options=http)
    except TimeoutError:
        serve.start(http_options=http)  # joins the controller the first start made
    try:
        serve.run(deployment.bind(settings), name=APP_NAME, route_prefix="/")
    except TimeoutError:  # deployed and running; its proxies are not serving yet
        pass
    _wait_until_serving(deadline, settings.start_timeout_s)
    if blocking:
        try:
            watch_service(settings)
        finally:
            stop_service()
    return f"http://{settings.host}:{settings.port}"


def _check_no_conflict(settings: ServeSettings) -> None:
    from ray import serve
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    if client is None:
        return  # no Serve on the cluster yet: this start makes it, on the port asked for
    http = client.http_config
    running = f"http://{http.host}:{http.port}"
    if http.port != settings.port:
        raise ServeConflict(
            f"Ray Serve already runs on this cluster on {running}, and a cluster has one "
            f"HTTP port for Serve: use --port {http.port}, or stop Serve first "
            "(serve.shutdown(), or `serve shutdown -y`)")
    if APP_NAME in serve.status().applications:
        raise ServeConflict(
            f"a reward service is deployed on this cluster already ({running}): stop its "
            f"command, or delete it (serve.delete({APP_NAME!r})) before starting another")


def stop_service() -> None:
    """Delete the reward service's application, and shut Ray Serve down when nothing else
    of it remains (a Serve that others use keeps running). Safe to call when it is gone."""
    from ray import serve
    from ray.serve.context import _get_global_client

    try:
        if _get_global_client(raise_if_no_controller_running=False) is None:
            return
        serve.delete(APP_NAME)
        if not serve.status().applications:
            serve.shutdown()
    except Exception as exc:  # a cluster already gone: nothing left to stop, say so
        logger.warning("could not stop the reward service: %s: %s", type(exc).__name__, exc)


class ServiceStopped(RuntimeError):
    """The service stopped serving while its command was still running."""


def watch_service(settings: ServeSettings, *, interval_s: float = 5.0, strikes: int = 3) -> None:
    """Block while the service serves; raise :class:`ServiceStopped`, saying why, once it has
    failed ``strikes`` checks in a row (its port refuses connections, its application or a
    proxy is not running, or Serve's controller does not answer). Ctrl-C ends it as usual.

    Without it the command outlived its listener: on a starved machine Serve's proxy and
    controller exited and the command went on holding a port that refused every connection.
    """
    failed = 0
    while True:
        time.sleep(interval_s)
        problem = service_problem(settings)
        failed = failed + 1 if problem else 0
        if problem:
            logger.warning("the reward service: %s (check %d of %d)", problem, failed, strikes)
        if failed >= strikes:
            raise ServiceStopped(f"the reward service stopped serving: {problem}")


def service_problem(settings: ServeSettings, timeout_s: float = 30.0) -> str | None:
    """What is wrong with the running service, or None when it serves."""
    import socket
    import threading

    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    try:
        socket.create_connection((host, settings.port), timeout=timeout_s).close()
    except OSError as exc:
        return f"port {settings.port} refuses connections ({exc})"
    answer: list = []

    def ask() -> None:  # a dead controller can leave the call waiting: bounded below
        from ray import serve

        try:
            answer.append(serve.status())
        except Exception as exc:  # any failure to answer is the finding
            answer.append(exc)

    thread = threading.Thread(target=ask, name="deepgym-serve-status", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not answer:
        return f"Ray Serve's controller did not answer within {timeout_s:g} s"
    if isinstance(answer[0], Exception):
        return f"Ray Serve's status failed: {type(answer[0]).__name__}: {answer[0]}"
    app = answer[0].applications.get(APP_NAME)
    if app is None or app.status != "RUNNING":
        return f"its application is {app.status if app else 'not deployed'}"
    proxies = sorted(getattr(p, "value", p) for p in answer[0].proxies.values())
    if set(proxies) != {"HEALTHY"}:
        return f"its proxies are {proxies or 'gone'}"
    return None


def _wait_until_serving(deadline: float, limit: float) -> None:
    from ray import serve

    while True:
        status = serve.status()
        app = status.applications.get(APP_NAME)
        proxies = sorted(getattr(p, "value", p) for p in status.proxies.values())
        if app is not None and app.status == "RUNNING" and set(proxies) == {"HEALTHY"}:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"the reward service did not start within {limit:g} s (application: "
                f"{app.status if app else 'not deployed'}, proxies: {proxies or 'none'})")
        time.sleep(0.5)
