"""Streams out of runs over the wire: an atom's chunks are read before it
commits, a follower at the tail gets each once, a reader that resumes from
its offset after a SIGKILL of the server sees no gap and no repeat, and the
statuses say which attempt committed."""

from __future__ import annotations

import random
import threading
import unittest
from typing import List

import harness

import continuum
from continuum import StreamChunk


class StreamsTest(unittest.TestCase):
    def test_follow_the_tail(self) -> None:
        _, client = harness.served(self)
        run = client.run("s1")
        got: List[StreamChunk] = []
        errors: List[BaseException] = []

        def follower() -> None:
            try:
                for c in client.run("s1").follow("tok", poll=5.0):
                    got.append(c)
            except BaseException as e:  # reported by the test
                errors.append(e)

        t = threading.Thread(target=follower)
        t.start()
        atom = run.begin()
        self.assertEqual(atom.append("tok", "a"), 0)
        self.assertEqual(atom.append("tok", "b", b"\xff", flush=True), 1)
        # Read before the commit: the point of streaming.
        b = run.read_stream("tok")
        self.assertEqual([c.data for c in b.chunks], [b"a", b"b", b"\xff"])
        self.assertEqual({c.status for c in b.chunks}, {"open"})
        atom.fail("retry")
        atom = run.begin()
        atom.append("tok", "c")
        atom.delta.set("k", "v")
        atom.commit()
        run.end("completed")
        t.join(timeout=60)
        self.assertFalse(t.is_alive(), "the follower did not see the stream end")
        self.assertEqual(errors, [])
        self.assertEqual([(c.offset, c.data, c.attempt, c.status) for c in run.read_stream("tok").chunks],
                         [(0, b"a", 1, "failed"), (1, b"b", 1, "failed"), (2, b"\xff", 1, "failed"), (3, b"c", 2, "committed")])
        self.assertEqual([c.offset for c in got], [0, 1, 2, 3])
        self.assertEqual([(s.name, s.chunks) for s in run.streams()], [("tok", 4)])
        with self.assertRaises(continuum.BadRequest):
            run.read_stream("a/b")

    def test_resume_after_sigkill(self) -> None:
        seed = harness.seed()
        rng = random.Random(seed)
        server, client = harness.served(self)
        run = client.run("s2")
        atom = run.begin()
        read: List[StreamChunk] = []
        nxt = 0

        def catch_up() -> None:
            nonlocal nxt
            b = run.read_stream("tok", nxt)
            for c in b.chunks:
                self.assertEqual(c.offset, nxt, f"seed {seed}")
                read.append(c)
                nxt += 1

        kill_at = rng.randrange(1, 40)
        for i in range(40):
            atom.append("tok", f"a{i}")
            if rng.random() < 0.3:
                catch_up()
            if i == kill_at:
                server.restart(kill=True)
                break
        catch_up()
        atom = run.begin(takeover=True)
        atom.append("tok", "retry", flush=True)
        atom.delta.set("k", "v")
        atom.commit()
        catch_up()
        self.assertEqual(read[-1].data, b"retry", f"seed {seed}")
        again = run.read_stream("tok").chunks
        self.assertEqual([c.data for c in again], [c.data for c in read], f"seed {seed}")
        for c in again:
            want = "committed" if c.data == b"retry" else "abandoned"
            self.assertEqual(c.status, want, f"seed {seed}: {c}")


if __name__ == "__main__":
    unittest.main()
