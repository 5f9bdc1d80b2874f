"""The Python client's transports measured side by side, against a real
continuumd (CONTINUUMD_BIN, or built by the tests' harness), in
alternating rounds, medians printed with every round's value. The atom is
bench/continuumd's: begin, one action executed here, commit of a ~200 B
delta (2 requests).

    transports.py cpu ROUNDS ATOMS NAME=SRC:TRANSPORT ...  # one client process per variant and round:
                                                          # its CPU (user, system) per atom; SRC is a
                                                          # clients/python/src (a baseline checkout's too)
    transports.py threads ROUNDS THREADS ATOMS             # one sync Client shared by THREADS threads, each
                                                          # on its own run: the pool of frames connections
                                                          # against one connection under a lock
    transports.py asyncio ROUNDS RUNS ATOMS                # one AsyncClient, RUNS runs at once: frames (one
                                                          # pipelined connection) against HTTP/1.1

--no-sync after the arguments runs the server with --unsafe-no-sync (the
client's cost without the disk's noise); strict durability otherwise.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

ARGS = {"region": "eu-west-1", "service": "checkout", "replicas": 3}
RESULT = b'{"status":"ok","deployment":"d-1234","replicas":3}'
MESSAGE = "deployed checkout to eu-west-1, 3 replicas; next: verify health checks"


def atoms(run: Any, n: int) -> None:
    for _ in range(n):
        with run.atom() as atom:
            atom.do("deploy", lambda key: RESULT, args=ARGS)
            atom.delta.set("step", str(atom.seq)).append_message("assistant", MESSAGE)


def child(sock: str, run_id: str, n: int, transport: str) -> None:
    """One client process of `cpu`: its CPU per atom after 100 atoms of
    warm-up, "USER SYS" in µs."""
    import continuum

    c = continuum.Client(socket=sock, **({"transport": transport} if transport != "-" else {}))
    run = c.run(run_id)
    atoms(run, 100)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    atoms(run, n)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    print("%.1f %.1f" % ((r1.ru_utime - r0.ru_utime) / n * 1e6, (r1.ru_stime - r0.ru_stime) / n * 1e6))
    c.close()


def summary(name: str, values: List[float], unit: str) -> str:
    return f"{name}: median {statistics.median(values):.0f} {unit} (rounds: {' '.join('%.0f' % v for v in values)})"


def cpu(server: Any, rounds: int, n: int, variants: List[Tuple[str, str, str]]) -> None:
    res: Dict[str, List[Tuple[float, float]]] = {name: [] for name, _, _ in variants}
    for r in range(rounds):
        for name, src, transport in variants if r % 2 == 0 else variants[::-1]:
            out = subprocess.run([sys.executable, __file__, "child", server.socket, f"cpu-{name}-{r}", str(n), transport],
                                 env=dict(os.environ, PYTHONPATH=src, PYTHONDONTWRITEBYTECODE="1"),
                                 capture_output=True, text=True, check=True).stdout.split()
            u, s = float(out[0]), float(out[1])
            res[name].append((u, s))
            print(f"round {r} {name:12s} user {u:6.1f} sys {s:6.1f} total {u + s:6.1f} µs/atom", flush=True)
    for name, v in res.items():
        print(summary(f"{name} user", [x[0] for x in v], "µs/atom"))
        print(summary(f"{name} user+sys", [x[0] + x[1] for x in v], "µs/atom"))


def threads(server: Any, rounds: int, nthreads: int, n: int) -> None:
    import continuum
    from continuum import _transport

    class LockedOne(_transport.SyncTransport):
        """One frames connection, a lock held over each exchange."""

        def __init__(self, ep: Any) -> None:
            super().__init__(ep, "frames")
            self._one = threading.Lock()
            self._conn: Any = None

        def request(self, method: str, path: str, body: Any) -> Any:
            with self._one:
                if self._conn is None:
                    self._conn = _transport._SyncFrames(self.ep, False)
                try:
                    return self._conn.exchange(method, path, body)
                except BaseException:
                    self._conn.close()
                    self._conn = None
                    raise

        def close(self) -> None:
            if self._conn is not None:
                self._conn.close()
            super().close()

    res: Dict[str, List[float]] = {"pool": [], "lock": []}
    for r in range(rounds):
        for name in ("pool", "lock") if r % 2 == 0 else ("lock", "pool"):
            c = continuum.Client(socket=server.socket, transport="frames")
            if name == "lock":
                c._t = LockedOne(c._t.ep)
            ths = [threading.Thread(target=lambda i=i: atoms(c.run(f"{name}-{r}-{i}"), n)) for i in range(nthreads)]
            t0 = time.perf_counter()
            for t in ths:
                t.start()
            for t in ths:
                t.join()
            rate = nthreads * n / (time.perf_counter() - t0)
            c.close()
            res[name].append(rate)
            print(f"round {r} {name}: {rate:.0f} atoms/s", flush=True)
    for name, v in res.items():
        print(summary(name, v, "atoms/s"))


def asyncio_runs(server: Any, rounds: int, nruns: int, n: int) -> None:
    import continuum

    async def one(transport: str, r: int) -> Tuple[float, float]:
        c = continuum.AsyncClient(socket=server.socket, transport=transport)
        runs = [await c.run(f"{transport}-{r}-{i}") for i in range(nruns)]

        async def worker(run: Any) -> None:
            for _ in range(n):
                async with run.atom() as atom:
                    await atom.do("deploy", lambda key: RESULT, args=ARGS)
                    atom.delta.set("step", "x").append_message("assistant", MESSAGE)

        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(run) for run in runs))
        elapsed = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        await c.close()
        used = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        return nruns * n / elapsed, used / (nruns * n) * 1e6

    res: Dict[str, List[Tuple[float, float]]] = {"frames": [], "http": []}
    for r in range(rounds):
        for t in ("frames", "http") if r % 2 == 0 else ("http", "frames"):
            rate, c = asyncio.run(one(t, r))
            res[t].append((rate, c))
            print(f"round {r} {t}: {rate:.0f} atoms/s, client CPU {c:.0f} µs/atom", flush=True)
    for t, v in res.items():
        print(summary(f"{t} atoms/s", [x[0] for x in v], ""))
        print(summary(f"{t} client CPU", [x[1] for x in v], "µs/atom"))


def main() -> None:
    if sys.argv[1] == "child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return
    import harness

    argv = [a for a in sys.argv[1:] if a != "--no-sync"]
    nosync = len(argv) != len(sys.argv) - 1
    server = harness.Server(*(["--unsafe-no-sync"] if nosync else []))
    print(f"# {' '.join(sys.argv)}: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    try:
        what, rounds = argv[0], int(argv[1])
        if what == "cpu":
            cpu(server, rounds, int(argv[2]), [(a.split("=", 1)[0], *a.split("=", 1)[1].rsplit(":", 1)) for a in argv[3:]])  # type: ignore[misc]
        elif what == "threads":
            threads(server, rounds, int(argv[2]), int(argv[3]))
        elif what == "asyncio":
            asyncio_runs(server, rounds, int(argv[2]), int(argv[3]))
        else:
            raise SystemExit(__doc__)
    finally:
        server.close()


if __name__ == "__main__":
    main()
