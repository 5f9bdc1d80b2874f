"""CONTINUUM for Python: durable execution for AI agents, through continuumd.

An agent's run is a sequence of atoms (thought-action cycles). Each atom's
actions happen at most once across crashes, of the agent or the server: the
server records the intent, the agent executes the tool with the idempotency
key it is given, and the server certifies the outcome::

    import continuum

    client = continuum.Client(socket="./agent-store.sock")
    run = client.run("deploy-42")
    with run.atom() as atom:
        receipt = atom.do_json("billing.charge", lambda key: charge(500, key), args={"cents": 500})
        atom.delta.set_json("receipt", receipt).append_message("assistant", "charged")

After a crash, the same code carries on: a certified action returns its
result without executing, an action whose outcome is unknown raises
:class:`InDoubt` with its key (or is settled by ``reconcile``). The
``@continuum.tool`` decorator makes a function a durable tool call;
:mod:`continuum.aio` has the same API for asyncio. Standard library only.
"""

from ._retry import GaveUp, RetryPolicy
from ._tool import current_atom, idempotency_key, tool
from .aio import AsyncAtom, AsyncClient, AsyncRun
from .client import Atom, Client, Run
from .delta import Delta
from .streams import StreamBatch, StreamChunk, StreamInfo
from .errors import (
    ActionFailed,
    APIError,
    AttemptLost,
    AuthRateLimited,
    BadRequest,
    BranchConflict,
    CommitMismatch,
    RollbackPending,
    Conflict,
    ContinuumError,
    Forbidden,
    InDoubt,
    InvalidArgs,
    InvalidDelta,
    NoAtom,
    NotEncrypted,
    NotErasable,
    NotFound,
    NothingToErase,
    RunDeleted,
    RunEnded,
    RunExists,
    RunHasForks,
    RunHeld,
    RunNotEnded,
    RunNotFound,
    ServerError,
    ShuttingDown,
    TooLarge,
    Unauthorized,
    Unavailable,
    Unprocessable,
    EventMismatch,
    SeqMismatch,
    WaitExists,
    WaitNotEnded,
    WaitNotFound,
)
from .waits import Event, SendResult, Wait
from .types import (
    ActionState,
    AtomRecord,
    Committed,
    DeletedRun,
    DidNotHappen,
    ErasedKey,
    Erasure,
    Happened,
    Interrupted,
    Lease,
    Message,
    Pending,
    RunInfo,
    RunMessage,
    State,
    Subgoal,
)

__version__ = "0.1.0"

__all__ = [
    "Client", "Run", "Atom", "AsyncClient", "AsyncRun", "AsyncAtom", "Delta", "tool", "idempotency_key", "current_atom",
    "Happened", "DidNotHappen", "RunInfo", "RunMessage", "Lease", "State", "Subgoal", "Message", "Pending",
    "Interrupted", "ActionState", "Committed", "AtomRecord", "DeletedRun", "Erasure", "ErasedKey",
    "ContinuumError", "APIError", "BadRequest", "Unauthorized", "Forbidden", "AuthRateLimited", "CommitMismatch", "NotFound", "RunNotFound", "Conflict",
    "RunHeld", "RunEnded", "RunExists", "BranchConflict", "RollbackPending", "RunNotEnded", "RunHasForks", "NotEncrypted", "NotErasable", "NothingToErase",
    "RunDeleted", "AttemptLost", "TooLarge", "Unprocessable", "InvalidDelta", "InvalidArgs", "ServerError",
    "ShuttingDown", "InDoubt", "ActionFailed", "Unavailable", "NoAtom",
    "RetryPolicy", "GaveUp",
    "Wait", "Event", "SendResult", "EventMismatch", "SeqMismatch", "WaitExists", "WaitNotEnded", "WaitNotFound",
    "StreamChunk", "StreamBatch", "StreamInfo",
]
