"""Blobs over the wire with the asyncio client (continuum.aio.put_blob,
open_blob): as test_blobs does with the synchronous one, a large value
streamed up in chunks from bytes, a file, an iterable and an async
iterable, referenced by a commit, read back from the state's reference
value, streamed down checked; the same bytes stored once; an unknown
blob is NotFound; a bad media type is the server's error; a damaged blob
never reads back whole."""

from __future__ import annotations

import io
import os
import unittest
from typing import AsyncIterator, List

import harness
from test_blobs import pieces

import continuum
from continuum import aio


async def agen(parts: List[bytes]) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


class AsyncBlobTest(unittest.IsolatedAsyncioTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = harness.Server()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    async def asyncSetUp(self) -> None:
        self.client = self.server.async_client(retry_for=20)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def test_roundtrip(self) -> None:
        run = await self.client.run("async-blobs")
        data = pieces(5 << 20, 2)  # 5 MiB
        whole = b"".join(data)
        async with run.atom() as atom:
            ref = await aio.put_blob(atom, agen(data), media_type="text/html")
            self.assertEqual(ref.size, len(whole))
            self.assertEqual(ref.media_type, "text/html")
            for src in (whole, io.BytesIO(whole), iter(data)):
                again = await aio.put_blob(atom, src, media_type="text/html")
                self.assertEqual(again, ref)
            empty = await aio.put_blob(atom, b"")
            self.assertEqual(empty.size, 0)
            atom.delta.set("page", ref.value).set("empty", empty.value)
        st = await run.state()
        got = aio.parse_ref(st.memory["page"])
        self.assertEqual(got, ref)
        names = sorted(os.listdir(os.path.join(self.server.store, "blobs")))
        self.assertEqual(len([n for n in names if len(n) == 64]), 2, names)

        # Read in pieces no larger than asked, and by async for.
        async with await aio.open_blob(self.client, "async-blobs", got) as body:
            read = b""
            while True:
                b = await body.read(1 << 20)
                self.assertLessEqual(len(b), 1 << 20)
                if not b:
                    break
                read += b
        self.assertEqual(read, whole)
        body = await aio.open_blob(self.client, "async-blobs", st.memory["page"].decode())
        try:
            self.assertEqual(b"".join([b async for b in body]), whole)
        finally:
            await body.close()
        async with await aio.open_blob(self.client, "async-blobs", aio.parse_ref(st.memory["empty"])) as body:
            self.assertEqual(await body.read(), b"")

        with self.assertRaises(continuum.NotFound):
            await aio.open_blob(self.client, "async-blobs", aio.BlobRef("00" * 32, 5))
        with self.assertRaises(ValueError):
            await aio.open_blob(self.client, "async-blobs", "plain text")

        # A media type the server refuses: its error, with its code.
        async with run.atom() as atom:
            with self.assertRaises(continuum.APIError) as cm:
                await aio.put_blob(atom, agen(data[:2]), media_type="not a media type;;")
            self.assertEqual(cm.exception.status, 400, cm.exception)
            atom.delta.set("k", b"v")

        # A chunk damaged on disk: the transfer starts, and reading raises.
        path = os.path.join(self.server.store, "blobs", got.hash)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            c = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([c[0] ^ 1]))
        with self.assertRaises((continuum.ContinuumError, OSError)):
            async with await aio.open_blob(self.client, "async-blobs", got) as body:
                while await body.read(1 << 20):
                    pass
        with self.assertRaises((continuum.ContinuumError, OSError)):
            async with await aio.open_blob(self.client, "async-blobs", got) as body:
                await body.read()


if __name__ == "__main__":
    unittest.main()
