"""Streams out of runs: an atom appends chunks (tokens, progress) to a named
stream of its run while it works, before it commits; anyone reads a stream
from an offset and follows its tail::

    with run.atom() as atom:
        for token in llm.stream(prompt):
            atom.append("tokens", token)
        atom.delta.set("answer", text)

    for chunk in client.run("r").follow("tokens", start=next_offset):
        print(chunk.offset, chunk.status, chunk.data)

Offsets are the log's: a reader that resumes from the offset after the
last chunk it read sees each chunk once, across its own crash and the
server's. Each chunk names the atom's seq and attempt; its ``status`` says
whether that attempt committed, failed, was abandoned (it stopped and a
later attempt of the same seq ran, or the run ended) or is still open.
A chunk is readable, and durable, at the server's next group commit after
``append`` returns (``flush=True`` waits for it).

The asyncio client has the same methods, awaited: ``await atom.append``,
``await run.read_stream``, ``await run.streams()``, and ``async for chunk
in run.follow(...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence

from . import _core, _wire
from ._wire import BytesLike, seg

if TYPE_CHECKING:
    from .client import Atom, Run

__all__ = ["StreamChunk", "StreamBatch", "StreamInfo"]


@dataclass(frozen=True)
class StreamChunk:
    """One chunk of a stream."""

    offset: int
    seq: int  #: the atom that appended it
    attempt: int  #: that atom's attempt, from 1 (the engine's count, not an attempt id)
    status: str  #: open, committed, failed or abandoned, when read
    data: bytes


@dataclass(frozen=True)
class StreamBatch:
    """What one read returns: the chunks, the offset to read from next, and
    whether the stream ended (the run ended and every chunk was read)."""

    chunks: List[StreamChunk]
    next: int
    ended: bool


@dataclass(frozen=True)
class StreamInfo:
    name: str
    chunks: int  #: durable chunks: the next offset a reader of the tail waits for


def _chunk(m: Mapping[str, Any]) -> StreamChunk:
    return StreamChunk(int(m["offset"]), int(m["seq"]), int(m["attempt"]), str(m["status"]), _wire.get_bytes(m, "data") or b"")


# The requests and answers, shared by the synchronous client (the mixins
# below) and the asyncio one (aio.py's AsyncRun and AsyncAtom).


def read_request(run_path: str, name: str, start: int, limit: Optional[int], wait: float) -> _core.Request:
    q = f"?from={int(start)}&wait_ms={int(wait * 1000)}"
    if limit is not None:
        q += f"&max={int(limit)}"
    return _core.Request("GET", f"{run_path}/streams/{seg(name)}{q}")


def batch_of(a: Mapping[str, Any]) -> StreamBatch:
    return StreamBatch([_chunk(c) for c in a["chunks"]], int(a["next"]), bool(a["ended"]))


def list_request(run_path: str) -> _core.Request:
    return _core.Request("GET", f"{run_path}/streams")


def infos_of(a: Mapping[str, Any]) -> List[StreamInfo]:
    return [StreamInfo(str(s["name"]), int(s["chunks"])) for s in a["streams"]]


def append_request(attempt_path: str, name: str, chunks: Sequence[BytesLike], flush: bool, index: Optional[int] = None) -> _core.Request:
    """The append of chunks; index (the count of the chunks this attempt
    appended to the stream before) makes a repeat of it after a lost
    answer append nothing twice."""
    if not chunks:
        raise ValueError("append: no chunk")
    body: Dict[str, Any] = {"flush": flush}
    if index is not None:
        body["index"] = index
    if len(chunks) == 1:
        _wire.put_bytes(body, "data", chunks[0])
    else:
        items: List[Dict[str, Any]] = []
        for c in chunks:
            item: Dict[str, Any] = {}
            _wire.put_bytes(item, "data", c)
            items.append(item)
        body["chunks"] = items
    return _core.Request("POST", f"{attempt_path}/streams/{seg(name)}", body)


def follow_done(b: StreamBatch, until_ended: bool) -> bool:
    """Whether a follower stops after batch b."""
    return b.ended or (not b.chunks and not until_ended)


class RunStreams:
    """The stream methods of :class:`continuum.Run` (a mixin)."""

    def read_stream(self: "Run", name: str, start: int = 0, *, max: Optional[int] = None, wait: float = 0.0) -> StreamBatch:  # type: ignore[misc]
        """The durable chunks of stream ``name`` from offset ``start``; with
        ``wait`` (seconds, at most the server's call wait of 20 s) it waits
        that long for one when there is none."""
        return batch_of(self.client._send(read_request(self._path, name, start, max, wait)))

    def follow(self: "Run", name: str, start: int = 0, *, poll: float = 10.0, until_ended: bool = True) -> Iterator[StreamChunk]:  # type: ignore[misc]
        """Yields the chunks of stream ``name`` from offset ``start`` as they
        become durable, with long polls of ``poll`` seconds, until the run
        ended and every chunk was yielded (or, with ``until_ended=False``,
        until a poll brings nothing). Keep the offset after the last chunk
        handled: following from it again, after any crash, yields the rest
        once."""
        nxt = int(start)
        while True:
            b = RunStreams.read_stream(self, name, nxt, wait=poll)
            yield from b.chunks
            nxt = b.next
            if follow_done(b, until_ended):
                return

    def streams(self: "Run") -> List[StreamInfo]:  # type: ignore[misc]
        """The run's streams that have durable chunks, by name."""
        return infos_of(self.client._send(list_request(self._path)))


class AtomStreams:
    """The stream methods of :class:`continuum.Atom` (a mixin)."""

    def append(self: "Atom", name: str, *chunks: BytesLike, flush: bool = False) -> int:  # type: ignore[misc]
        """Appends the chunks, in order, to stream ``name`` of the run as
        part of this attempt, and returns the first one's offset. Readers
        see them before the atom commits; ``flush`` waits until they are
        durable. A chunk is at most 1 MiB; at most 1024 per call."""
        if not chunks:
            raise ValueError("append: no chunk")
        self._flush(self._take_pending())
        self._ensure()
        with self._appends_lock:
            # The attempt's count of chunks to the stream: sent as the
            # index, so the client's retries never append one twice.
            key = (self._path, name)
            index = self._appended.get(key, 0)
            a = self.run.client._send(append_request(self._path, name, chunks, flush, index))
            self._appended[key] = index + len(chunks)
        return int(a["offset"])
