"""A representative part of the suites again over HTTP/1.1
(transport="http"), the transport frames replaced as the default: the
contract (sync and asyncio), round trips, branches, and the server
SIGKILLed under load. CONTINUUM_TRANSPORT=http runs every suite so."""

from __future__ import annotations

import unittest
from typing import Any

import harness
import test_async
import test_branches
import test_contract
import test_server_crash


class _OverHTTP:
    """Sets the harness's transport to HTTP for the test, and checks that
    the client the fixture made uses it."""

    def _to_http(self: Any) -> None:
        old = harness.TRANSPORT
        harness.TRANSPORT = "http"
        self.addCleanup(setattr, harness, "TRANSPORT", old)

    def _check(self: Any) -> None:
        c = getattr(self, "client", None)
        if c is not None:
            self.assertFalse(c._t.frames, "the fixture's client is not on HTTP")


class SyncContractOverHTTP(_OverHTTP, test_contract.ContractTest):
    def setUp(self) -> None:
        self._to_http()
        super().setUp()
        self._check()


class AsyncContractOverHTTP(_OverHTTP, test_async.AsyncContractTest):
    async def asyncSetUp(self) -> None:
        self._to_http()
        await super().asyncSetUp()
        self._check()


class AsyncRoundTripOverHTTP(_OverHTTP, test_async.AsyncRoundTripTest):
    async def asyncSetUp(self) -> None:
        self._to_http()
        await super().asyncSetUp()
        self._check()


class BranchOverHTTP(_OverHTTP, test_branches.BranchTest):
    def setUp(self) -> None:
        self._to_http()
        super().setUp()


class ServerCrashOverHTTP(_OverHTTP, test_server_crash.ServerCrashTest):
    def setUp(self) -> None:
        self._to_http()
        super().setUp()


if __name__ == "__main__":
    unittest.main()
