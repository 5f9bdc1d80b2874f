"""One Python client of bench/continuumd's throughput measurement: the
atom of the Go side (begin, one action executed here, commit of the same
delta) through clients/python, perRun times on its own run.

    pyclient.py SOCKET RUN ATOMS     # prints READY, waits for a line, runs, prints DONE and each atom's µs

CONTINUUM_BENCH_TRANSPORT=frames|http|auto picks the client's transport
(default auto: frames, HTTP if the server has none). With
CONTINUUM_BENCH_CLIENT_CPU=1 the client also writes its own CPU time per
atom (user and system, from GO to DONE) to stderr:
"client-cpu TRANSPORT US".
"""

import os
import sys
import time

import continuum

ARGS = {"region": "eu-west-1", "service": "checkout", "replicas": 3}
RESULT = b'{"status":"ok","deployment":"d-1234","replicas":3}'
MESSAGE = "deployed checkout to eu-west-1, 3 replicas; next: verify health checks"


def main() -> None:
    sock, run_id, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    transport = os.environ.get("CONTINUUM_BENCH_TRANSPORT")
    # (a baseline client, -python-before, may predate the argument)
    client = continuum.Client(socket=sock, **({"transport": transport} if transport else {}))
    run = client.run(run_id)
    print("READY", flush=True)
    sys.stdin.readline()
    cpu0 = time.process_time()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        with run.atom() as atom:
            atom.do("deploy", lambda key: RESULT, args=ARGS)
            atom.delta.set("step", str(atom.seq)).append_message("assistant", MESSAGE)
        times.append((time.perf_counter() - t0) * 1e6)
    cpu = time.process_time() - cpu0
    if os.environ.get("CONTINUUM_BENCH_CLIENT_CPU") == "1":
        print("client-cpu %s %.1f" % ("frames" if getattr(client._t, "frames", False) else "http", cpu / n * 1e6), file=sys.stderr, flush=True)
    print("DONE " + " ".join("%.1f" % t for t in times), flush=True)
    client.close()


if __name__ == "__main__":
    main()
