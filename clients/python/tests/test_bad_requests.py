"""Bad requests get clear answers: a status, a code, the field; the server
stays up. Raw HTTP, and the client's exceptions."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import unittest

import harness

import continuum


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


class BadRequestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.server = harness.Server("--max-body", "65536")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.server.close()

    def raw(self, method: str, path: str, body: "bytes | None" = None) -> "tuple[int, dict]":
        return harness.raw(self.server.socket, method, path, body)

    def assertError(self, answer: "tuple[int, dict]", status: int, code: str, field: "str | None" = None) -> None:
        got_status, body = answer
        self.assertEqual(got_status, status, body)
        self.assertIsInstance(body, dict, body)
        err = body["error"]
        self.assertEqual(err["code"], code, err)
        self.assertTrue(err["message"])
        if field is not None:
            self.assertEqual(err.get("field"), field, err)

    def attempt(self, run: str) -> str:
        self.assertEqual(self.raw("PUT", f"/v1/runs/{run}")[0], 200)
        status, b = self.raw("POST", f"/v1/runs/{run}/attempts", b"{}")
        self.assertEqual(status, 201, b)
        return f"/v1/runs/{run}/attempts/{b['attempt']}"

    def test_malformed_json(self) -> None:
        p = self.attempt("malformed")
        self.assertError(self.raw("POST", p + "/commit", b'{"delta": [}'), 400, "bad_request")
        self.assertError(self.raw("POST", p + "/commit", b"\xff\xfe"), 400, "bad_request")
        self.assertError(self.raw("POST", p + "/commit", b'{"delta": []} trailing'), 400, "bad_request")
        self.assertError(self.raw("POST", p + "/commit", b'{"delta": [], "extra": 1}'), 400, "bad_request", "extra")
        self.assertError(self.raw("POST", p + "/commit", b'{"delta": [{"op": "set", "key": 3}]}'), 400, "bad_request", "delta[0].key")
        self.assertError(self.raw("POST", p + "/calls/0", b'{"tool": ""}'), 400, "bad_request", "tool")
        self.assertError(self.raw("POST", p + "/calls/0", b'{"tool": "t", "args": {"a": 1, "a": 2}}'), 422, "invalid_args", "args")
        self.assertError(self.raw("POST", "/v1/runs/malformed/attempts", b'{"lease_ms": "long"}'), 400, "bad_request", "lease_ms")
        # The attempt is untouched by all of it.
        self.assertEqual(self.raw("POST", p + "/commit", b'{"delta": []}')[0], 200)

    def test_huge_bodies(self) -> None:
        p = self.attempt("huge")
        big = json.dumps({"delta": [{"op": "set", "key": "k", "value": "x" * 100_000}]}).encode()
        self.assertError(self.raw("POST", p + "/commit", big), 413, "too_large")
        self.assertError(self.raw("POST", p + "/calls/0", b'{"tool":"t","args":"' + b"y" * 200_000 + b'"}'), 413, "too_large")
        self.assertTrue(self.server.healthy())
        client = self.server.client()
        self.addCleanup(client.close)
        run = client.run("huge-client")
        with self.assertRaises(continuum.TooLarge):
            with run.atom() as atom:
                atom.delta.set("k", "z" * 100_000)

    def test_unknown_run_attempt_call_route(self) -> None:
        self.assertError(self.raw("GET", "/v1/runs/nobody"), 404, "run_not_found", "run")
        self.assertError(self.raw("POST", "/v1/runs/nobody/attempts", b"{}"), 404, "run_not_found", "run")
        self.assertError(self.raw("GET", "/v1/runs/nobody/state"), 404, "run_not_found", "run")
        self.attempt("known")
        self.assertError(self.raw("POST", "/v1/runs/known/attempts/att_nope/commit", b'{"delta":[]}'), 404, "attempt_not_found", "attempt")
        p = self.attempt("known2")
        self.assertError(self.raw("POST", p + "/calls/5/outcome", b'{"result":"x"}'), 404, "call_not_found", "call")
        self.assertError(self.raw("GET", "/v1/nothing"), 404, "route_not_found")
        self.assertError(self.raw("PATCH", "/v1/runs/known"), 405, "method_not_allowed")
        client = self.server.client()
        self.addCleanup(client.close)
        with self.assertRaises(continuum.RunNotFound):
            continuum.Run(client, "nobody", client.run("someone").opened).info()

    def test_bad_run_id(self) -> None:
        self.assertError(self.raw("PUT", "/v1/runs/" + "r" * 300), 400, "invalid_run_id", "run")
        client = self.server.client()
        self.addCleanup(client.close)
        with self.assertRaises(continuum.BadRequest) as cm:
            client.run("x" * 300)
        self.assertEqual(cm.exception.code, "invalid_run_id")


class TokenTest(unittest.TestCase):
    def test_wrong_or_missing_token(self) -> None:
        tmp = tempfile.mkdtemp(prefix="cdtok-", dir="/tmp")
        self.addCleanup(shutil.rmtree, tmp, True)
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write("t0k3n-0123456789abcdef\n")
        os.chmod(token_file, 0o600)
        port = free_port()
        server = harness.Server("--listen", f"127.0.0.1:{port}", "--token-file", token_file)
        self.addCleanup(server.close)

        def get(token: "str | None") -> "tuple[int, dict]":
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                conn.request("GET", "/v1/runs", headers={"Authorization": f"Bearer {token}"} if token else {})
                r = conn.getresponse()
                return r.status, json.loads(r.read())
            finally:
                conn.close()

        self.assertEqual(get(None)[1]["error"]["code"], "unauthorized")
        self.assertEqual(get("t0k3n-0123456789abcdeX")[0], 401)
        self.assertEqual(get("t0k3n-0123456789abcdef")[0], 200)
        # The socket takes the token too when the server has one.
        self.assertEqual(harness.raw(server.socket, "GET", "/v1/runs")[0], 401)

        bad = continuum.Client(url=f"http://127.0.0.1:{port}", token="wrong-token-000000000")
        self.addCleanup(bad.close)
        with self.assertRaises(continuum.Unauthorized):
            bad.runs()
        good = continuum.Client(url=f"http://127.0.0.1:{port}", token="t0k3n-0123456789abcdef")
        self.addCleanup(good.close)
        run = good.run("over-tcp")
        with run.atom() as atom:
            atom.do("t", lambda k: b"ok")
        self.assertEqual(run.info().last_seq, 1)
        with self.assertRaises(ValueError):
            continuum.Client(url=f"http://127.0.0.1:{port}")  # TCP without a token


class ScopedTokenTest(unittest.TestCase):
    def test_scoped_token(self) -> None:
        """A token made by `continuumd token` for runs agent-7-*: its runs
        only, listed and written; another run is Forbidden, even to read."""
        tmp = tempfile.mkdtemp(prefix="cdscope-", dir="/tmp")
        self.addCleanup(shutil.rmtree, tmp, True)
        tokens = os.path.join(tmp, "tokens")

        def make(name: str, rights: str, runs: str) -> str:
            out = subprocess.run([harness.binary(), "token", "--tokens", tokens, "--name", name, "--rights", rights,
                                  "--runs", runs], check=True, capture_output=True, text=True)
            return out.stdout.strip()

        admin, agent = make("ops", "admin", "*"), make("agent7", "read,write", "agent-7-")
        server = harness.Server("--tokens", tokens)
        self.addCleanup(server.close)
        ops = continuum.Client(socket=server.socket, token=admin)
        self.addCleanup(ops.close)
        with ops.run("billing").atom() as atom:
            atom.delta.set("card", b"4111")
        cl = continuum.Client(socket=server.socket, token=agent)
        self.addCleanup(cl.close)
        run = cl.run("agent-7-a")
        with run.atom() as atom:
            atom.do("t", lambda k: b"ok")
        self.assertEqual([r.id for r in cl.runs()], ["agent-7-a"])
        self.assertEqual(sorted(r.id for r in ops.runs()), ["agent-7-a", "billing"])
        for f in (lambda: cl.run("billing"), lambda: cl.run("nosuch"), lambda: cl.stats()):
            with self.assertRaises(continuum.Forbidden) as cm:
                f()
            self.assertEqual(cm.exception.status, 403)


class TLSTest(unittest.TestCase):
    @unittest.skipUnless(shutil.which("openssl"), "needs the openssl command to make a certificate")
    def test_tls_with_token(self) -> None:
        tmp = tempfile.mkdtemp(prefix="cdtls-", dir="/tmp")
        self.addCleanup(shutil.rmtree, tmp, True)
        cert, key, token_file = (os.path.join(tmp, n) for n in ("cert.pem", "key.pem", "token"))
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=continuumd test",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        os.chmod(key, 0o600)
        with open(token_file, "w") as f:
            f.write("tls-token-0123456789abcdef")
        os.chmod(token_file, 0o600)
        port = free_port()
        server = harness.Server("--listen", f"127.0.0.1:{port}", "--token-file", token_file, "--tls-cert", cert, "--tls-key", key)
        self.addCleanup(server.close)
        client = continuum.Client(url=f"https://127.0.0.1:{port}", token="tls-token-0123456789abcdef", ca_file=cert)
        self.addCleanup(client.close)
        run = client.run("over-tls")
        with run.atom() as atom:
            self.assertEqual(atom.do("t", lambda k: b"ok"), b"ok")
        self.assertEqual(run.info().last_seq, 1)
        untrusting = continuum.Client(url=f"https://127.0.0.1:{port}", token="tls-token-0123456789abcdef", retry_for=0.5)
        self.addCleanup(untrusting.close)
        with self.assertRaises(ssl.SSLCertVerificationError):
            untrusting.runs()  # the server's certificate is not trusted: not retried


if __name__ == "__main__":
    unittest.main()
