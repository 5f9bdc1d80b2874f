"""Nothing serving the socket: Unavailable says which path was tried,
resolved from the working directory, and how continuumd names it."""

from __future__ import annotations

import asyncio
import os
import tempfile
import unittest

import harness  # noqa: F401  (puts src/ on the path)

import continuum
from continuum.aio import AsyncClient


class NoServerTest(unittest.TestCase):
    def test_names_the_resolved_path(self) -> None:
        with tempfile.TemporaryDirectory(prefix="cdpy-none-", dir="/tmp") as d:
            sock = os.path.join(d, "store.sock")
            rel = os.path.relpath(sock)
            c = continuum.Client(socket=rel, retry_for=0.2)
            try:
                with self.assertRaises(continuum.Unavailable) as cm:
                    c.runs()
            finally:
                c.close()
            self.assertIn("is continuumd running, serving " + sock, str(cm.exception))

            async def run() -> str:
                a = AsyncClient(socket=rel, retry_for=0.2)
                try:
                    await a.runs()
                except continuum.Unavailable as e:
                    return str(e)
                finally:
                    await a.close()
                return ""

            self.assertIn("is continuumd running, serving " + sock, asyncio.run(run()))


if __name__ == "__main__":
    unittest.main()
