"""The durable tool decorator and the atom a block of code runs in."""

from __future__ import annotations

import functools
import inspect
import json
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, TypeVar, Union, cast

from .errors import NoAtom
from .types import DidNotHappen, Happened

if TYPE_CHECKING:
    from .aio import AsyncAtom
    from .client import Atom

F = TypeVar("F", bound=Callable[..., Any])

#: The atom of the innermost ``with run.atom()`` (or ``async with``) block.
current: ContextVar[Optional[Union["Atom", "AsyncAtom"]]] = ContextVar("continuum_atom", default=None)

#: The idempotency key of the durable tool executing now.
_key: ContextVar[Optional[str]] = ContextVar("continuum_key", default=None)


def idempotency_key() -> str:
    """The idempotency key of the durable tool call executing now: pass it
    to the downstream, so that it can tell a repeated call from a new one
    and answer a lookup of it."""
    k = _key.get()
    if k is None:
        raise NoAtom("idempotency_key() is for the body of a @continuum.tool function while it executes")
    return k


def current_atom() -> Union["Atom", "AsyncAtom"]:
    """The atom the calling code runs in; NoAtom outside one."""
    a = current.get()
    if a is None:
        raise NoAtom("a durable tool was called outside an atom: call it inside `with run.atom():` (or `async with`)")
    return a


def tool(
    name: Optional[str] = None,
    *,
    idempotent: bool = False,
    reconcile: Optional[Callable[[str], Any]] = None,
    redact: Optional[Sequence[str]] = None,
    redact_result: Optional[Sequence[str]] = None,
) -> Callable[[F], F]:
    """Makes a function a durable tool call, in the spirit of DBOS's
    ``@DBOS.step`` and Restate's ``ctx.run``::

        @continuum.tool("billing.charge", reconcile=lookup_charge)
        def charge(customer: str, cents: int) -> dict:
            return billing.charge(customer, cents, idempotency_key=continuum.idempotency_key())

        with run.atom() as atom:
            receipt = charge("c1", 500)   # executed at most once, across crashes

    Called inside an atom, the function runs as the action
    ``name`` (default: its qualified name) whose args are its bound
    arguments (a JSON object; they must be JSON values) and whose result
    is its return value (stored as JSON): at most once, its certified
    result returned on every later call of the same action. It receives the
    idempotency key as ``idempotency_key`` if it takes a parameter of that
    name. ``reconcile(key)`` settles an in-doubt call: it returns
    Happened(result) or DidNotHappen(). Coroutine functions are supported
    and run in an ``async with`` atom.
    """

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn)
        tool_name = name or f"{fn.__module__}.{fn.__qualname__}"

        def bound_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            b = sig.bind(*args, **kwargs)
            b.apply_defaults()
            values = dict(b.arguments)
            try:
                json.dumps(values)
            except TypeError as e:
                raise TypeError(f"{tool_name}: the arguments of a durable tool must be JSON values: {e}") from None
            return values

        def rec(key: str) -> Union[Happened, DidNotHappen]:
            assert reconcile is not None
            v = reconcile(key)
            if not isinstance(v, (Happened, DidNotHappen)):
                raise TypeError(f"{tool_name}: reconcile must return Happened(result) or DidNotHappen(), not {v!r}")
            return v

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                from .aio import AsyncAtom

                atom = current_atom()
                if not isinstance(atom, AsyncAtom):
                    raise NoAtom(f"{tool_name} is a coroutine: call it inside `async with run.atom():`")
                values = bound_args(args, kwargs)

                async def execute(key: str) -> Any:
                    token = _key.set(key)
                    try:
                        return await fn(*args, **kwargs)
                    finally:
                        _key.reset(token)

                return await atom.do_json(tool_name, execute, args=values, idempotent=idempotent,
                                          reconcile=rec if reconcile else None, redact=redact, redact_result=redact_result)

            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from .client import Atom

            atom = current_atom()
            if not isinstance(atom, Atom):
                raise NoAtom(f"{tool_name} is not a coroutine: call it inside `with run.atom():`, not `async with`")
            values = bound_args(args, kwargs)

            def execute(key: str) -> Any:
                token = _key.set(key)
                try:
                    return fn(*args, **kwargs)
                finally:
                    _key.reset(token)

            return atom.do_json(tool_name, execute, args=values, idempotent=idempotent,
                                reconcile=rec if reconcile else None, redact=redact, redact_result=redact_result)

        return cast(F, wrapper)

    return decorate
