"""Leave a no-verdict completion out of TRL's advantages when there are several reward functions.

TRL (1.16) turns a reward function's ``None`` into NaN and leaves a completion out of its
group's baseline only when *every* reward function returned ``None`` for it. With a second
function (a length or format reward), the weighted sum skips the NaN: the missing deepgym score
counts as 0 and the completion is trained on as if it had failed. :func:`mask_unjudged` wraps
the functions so that every other one returns ``None`` wherever deepgym had no verdict.

How the verdicts reach the other functions: TRL hands every reward function of one step the
same ``completions`` list. The first wrapper called with a list runs the deepgym function on it
(whichever wrapper that is, in whatever order or concurrency TRL calls them) and the others take
its rewards from the shared record of that call, so the deepgym function runs once per step and
the mask is exactly the rewards it returned. A list is recognised by identity and contents
(the record holds the list, so its id cannot be reused while recorded); each wrapper takes a
record once, so calling again on the same list is a new call.

Example:
    deepgym = make_trl_reward_fn(env)
    reward_funcs = mask_unjudged(deepgym, length_reward)
    trainer = GRPOTrainer(model=..., reward_funcs=reward_funcs,
                          args=GRPOConfig(reward_weights=[1.0, 0.5], ...))
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

__all__ = ["mask_unjudged"]

# Calls remembered at once: a record is dropped when every wrapper took it; this bounds the
# records of wrappers a trainer never calls (one not in reward_funcs).
_MAX_CALLS = 8


def _unwrapped(fn: Callable) -> Callable:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _is_async(fn: Callable) -> bool:
    """What TRL checks (``trl.trainer.utils.is_async_callable``): a coroutine function, also
    behind ``functools.partial`` or as a class's ``async def __call__``."""
    fn = _unwrapped(fn)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _name(fn: Callable) -> str:
    """The name TRL logs a function under (``get_callable_name``)."""
    fn = _unwrapped(fn)
    return getattr(fn, "__name__", type(fn).__name__)


class _Call:
    """One TRL call's record: its completions and the deepgym function's rewards for them."""

    __slots__ = ("completions", "snapshot", "future", "takers", "owner_thread")

    def __init__(self, completions: Any) -> None:
        self.completions = completions
        self.snapshot = list(completions)
        self.future: Future = Future()
        self.takers: set[int] = set()
        self.owner_thread = threading.get_ident()


class _Verdicts:
    """The records of recent calls, shared by the wrappers of one :func:`mask_unjudged`."""

    def __init__(self, judge: Callable, wrappers: int) -> None:
        self.judge = judge
        self.judge_is_async = _is_async(judge)
        self.wrappers = wrappers
        self._lock = threading.Lock()
        self._calls: OrderedDict[int, _Call] = OrderedDict()

    def take(self, taker: int, completions: Any) -> tuple[_Call, bool]:
        """``(record, owner)`` for this call; the owner runs the deepgym function."""
        with self._lock:
            call = self._calls.get(id(completions))
            if (call is not None and call.completions is completions
                    and taker not in call.takers and call.snapshot == list(completions)):
                call.takers.add(taker)
                if len(call.takers) == self.wrappers:  # everyone has it: forget the list
                    del self._calls[id(completions)]
                return call, False
            call = _Call(completions)
            call.takers.add(taker)
            self._calls[id(completions)] = call
            self._calls.move_to_end(id(completions))
            while len(self._calls) > _MAX_CALLS:
                self._calls.popitem(last=False)
            return call, True

    def failed(self, call: _Call, exc: BaseException) -> None:
        """The deepgym function raised: waiters see it, and no later call takes the record."""
        with self._lock:
            if self._calls.get(id(call.completions)) is call:
                del self._calls[id(call.completions)]
        if not call.future.done():  # waiters get an Exception (a cancelled owner's too)
            call.future.set_exception(exc if isinstance(exc, Exception)
                                      else RuntimeError(f"scoring interrupted: {exc!r}"))

    def rewards_sync(self, taker: int, kwargs: dict[str, Any]) -> list[Any]:
        call, owner = self.take(taker, _completions(kwargs))
        if owner:
            try:
                rewards = list(self.judge(**kwargs))
            except BaseException as exc:
                self.failed(call, exc)
                raise
            call.future.set_result(rewards)
            return rewards
        if not call.future.done() and call.owner_thread == threading.get_ident():
            # The owner is an async wrapper suspended on this very thread's event loop.
            raise RuntimeError("mask_unjudged: a synchronous reward function was called from "
                               "inside the event loop that is scoring the same completions")
        return call.future.result()

    async def rewards_async(self, taker: int, kwargs: dict[str, Any]) -> list[Any]:
        call, owner = self.take(taker, _completions(kwargs))
        if not owner:
            return await asyncio.wrap_future(call.future)
        try:
            if self.judge_is_async:
                rewards = list(await self.judge(**kwargs))
            else:  # a synchronous deepgym function must not hold up the trainer's event loop
                loop = asyncio.get_running_loop()
                rewards = list(await loop.run_in_executor(
                    None, functools.partial(self.judge, **kwargs)))
        except BaseException as exc:
            self.failed(call, exc)
            raise
        call.future.set_result(rewards)
        return rewards


def _completions(kwargs: dict[str, Any]) -> Any:
    completions = kwargs.get("completions")
    if not isinstance(completions, Sequence) or isinstance(completions, (str, bytes)):
        raise TypeError("mask_unjudged: reward functions are called as TRL calls them, with "
                        "keyword arguments, completions= a list")
    return completions


def _masked(rewards: Sequence[Any], verdicts: Sequence[Any], name: str) -> list[Any]:
    rewards = list(rewards)
    if len(rewards) != len(verdicts):
        raise ValueError(f"mask_unjudged: {name} returned {len(rewards)} rewards for "
                         f"{len(verdicts)} completions")
    pairs = zip(rewards, verdicts, strict=True)
    return [None if verdict is None else reward for reward, verdict in pairs]


class _Wrapper:
    """A wrapped reward function: TRL's calling convention, the wrapped function's name."""

    def __init__(self, fn: Callable, verdicts: _Verdicts, judge: bool) -> None:
        self.__wrapped__ = fn
        self.__name__ = _name(fn)
        self._verdicts = verdicts
        self._judge = judge

    def __repr__(self) -> str:
        role = "deepgym" if self._judge else "masked by deepgym's verdicts"
        return f"mask_unjudged({self.__name__!r}, {role})"

    def _check(self, args: tuple) -> None:
        if args:
            raise TypeError(f"{self.__name__}: call it with keyword arguments, as TRL does")


class _SyncWrapper(_Wrapper):
    def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        self._check(args)
        verdicts = self._verdicts.rewards_sync(id(self), kwargs)
        if self._judge:
            return list(verdicts)
        return _masked(self.__wrapped__(**kwargs), verdicts, self.__name__)


class _AsyncWrapper(_Wrapper):
    async def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        self._check(args)
        verdicts = await self._verdicts.rewards_async(id(self), kwargs)
        if self._judge:
            return list(verdicts)
        fn = self.__wrapped__
        if _is_async(fn):
            rewards = await fn(**kwargs)
        else:  # another function's own work stays off the trainer's event loop too
            loop = asyncio.get_running_loop()
            rewards = await loop.run_in_executor(None, functools.partial(fn, **kwargs))
        return _masked(rewards, verdicts, self.__name__)


def mask_unjudged(deepgym_fn: Callable, *other_fns: Callable) -> list[Callable]:
    """``[deepgym_fn, *other_fns]`` wrapped for ``GRPOTrainer(reward_funcs=...)``: each other
    function returns ``None`` wherever ``deepgym_fn`` returned ``None`` (no verdict), so TRL
    leaves that completion out of its group's baseline and gives it no advantage.

    ``deepgym_fn`` is any reward function that returns ``None`` for no verdict (e.g.
    :func:`~deepgym_ray.integrations.trl.make_trl_reward_fn`); it runs once per step whichever
    wrapper TRL calls first. The wrappers keep TRL's convention: keyword arguments, the
    wrapped function's ``__name__`` (its log name), and ``async`` where the function is async
    or ``deepgym_fn`` is (so TRL gathers them on its event loop). Keep the weights in
    ``reward_weights`` in the returned order.

    Example:
        funcs = mask_unjudged(make_trl_reward_fn(env), length_reward)
        funcs[1](completions=completions, prompts=prompts)  # None where deepgym had none
    """
    for fn in (deepgym_fn, *other_fns):
        if not callable(fn):
            raise TypeError(f"mask_unjudged: {fn!r} is not a reward function")
    verdicts = _Verdicts(deepgym_fn, 1 + len(other_fns))
    judge_async = verdicts.judge_is_async
    wrapped: list[Callable] = [
        (_AsyncWrapper if judge_async else _SyncWrapper)(deepgym_fn, verdicts, judge=True)]
    for fn in other_fns:
        kind = _AsyncWrapper if judge_async or _is_async(fn) else _SyncWrapper
        wrapped.append(kind(fn, verdicts, judge=False))
    return wrapped
