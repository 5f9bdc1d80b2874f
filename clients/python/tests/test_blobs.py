"""Blobs over the wire: a large value streamed up in chunks, referenced
by a commit, read back from the state's reference value, streamed down
checked; the same bytes stored once; an unknown blob is NotFound; a
damaged blob never reads back whole."""

from __future__ import annotations

import hashlib
import os
import unittest

import harness

import continuum
from continuum import blobs


def pieces(n: int, seed: int) -> "list[bytes]":
    out, h = [], hashlib.sha256(str(seed).encode()).digest()
    total = 0
    while total < n:
        h = hashlib.sha256(h).digest()
        b = (h.hex() + " <td>cell</td>\n").encode() * 200
        out.append(b[: n - total])
        total += len(out[-1])
    return out


class BlobTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = harness.Server()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    def test_roundtrip(self) -> None:
        client = self.server.client()
        run = client.run("blobs")
        data = pieces(5 << 20, 1)  # 5 MiB, sent as an iterable of pieces
        whole = b"".join(data)
        with run.atom() as atom:
            ref = blobs.put_blob(atom, iter(data), media_type="text/html")
            again = blobs.put_blob(atom, whole, media_type="text/html")
            self.assertEqual(ref, again)
            self.assertEqual(ref.size, len(whole))
            atom.delta.set("page", ref.value)
        st = run.state()
        got = blobs.parse_ref(st.memory["page"])
        self.assertEqual(got, ref)
        names = os.listdir(os.path.join(self.server.store, "blobs"))
        self.assertEqual(len(names), 1, names)
        with blobs.open_blob(client, "blobs", got) as body:
            read = b""
            while True:
                b = body.read(1 << 20)
                if not b:
                    break
                read += b
        self.assertEqual(read, whole)

        with self.assertRaises(continuum.NotFound):
            blobs.open_blob(client, "blobs", blobs.BlobRef("00" * 32, 5))
        self.assertIsNone(blobs.parse_ref("plain text"))
        self.assertIsNone(blobs.parse_ref(b"\x00continuum-blob:" + b"0" * 64 + b"/01"))

        # A chunk damaged on disk: the transfer starts, and reading raises.
        path = os.path.join(self.server.store, "blobs", names[0])
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            c = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([c[0] ^ 1]))
        with self.assertRaises((continuum.ContinuumError, OSError)):
            with blobs.open_blob(client, "blobs", got) as body:
                while body.read(1 << 20):
                    pass


if __name__ == "__main__":
    unittest.main()
