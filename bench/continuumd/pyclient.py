"""One Python client of bench/continuumd's throughput measurement: the
atom of the Go side (begin, one action executed here, commit of the same
delta) through clients/python, perRun times on its own run.

    pyclient.py SOCKET RUN ATOMS     # prints READY, waits for a line, runs, prints DONE and each atom's µs
"""

import sys
import time

import continuum

ARGS = {"region": "eu-west-1", "service": "checkout", "replicas": 3}
RESULT = b'{"status":"ok","deployment":"d-1234","replicas":3}'
MESSAGE = "deployed checkout to eu-west-1, 3 replicas; next: verify health checks"


def main() -> None:
    sock, run_id, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = continuum.Client(socket=sock)
    run = client.run(run_id)
    print("READY", flush=True)
    sys.stdin.readline()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        with run.atom() as atom:
            atom.do("deploy", lambda key: RESULT, args=ARGS)
            atom.delta.set("step", str(atom.seq)).append_message("assistant", MESSAGE)
        times.append((time.perf_counter() - t0) * 1e6)
    print("DONE " + " ".join("%.1f" % t for t in times), flush=True)
    client.close()


if __name__ == "__main__":
    main()
