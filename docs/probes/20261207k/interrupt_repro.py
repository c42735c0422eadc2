"""Ctrl-C (SIGINT to the process group) sent to `profile cluster` 0.9-1.8 s in, 24 times: every exit must be 130.

    PYTHONPATH=. python docs/probes/20261207k/interrupt_repro.py

Before 2026-12-07 08:35 (main at 9a0ee4b): 23 of 24 exited 130, one (1.13 s in) ran to the end and exited 0, as
test_interrupts.py::test_profile_cluster[SIGINT] did in CI that morning; with processes.threads_block: 48 of 48.
"""
import collections
import os
import signal
import subprocess
import sys
codes = collections.Counter()
for i in range(24):
    d = 0.9 + 0.9 * i / 23
    p = subprocess.Popen([sys.executable, "-m", "autoplan.cli", "profile", "cluster", "--nproc", "2", "--max-size", "64KiB",
                          "--repeats", "2", "--memory-per-device", "256MiB", "--out", "/tmp/intr-cluster.json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        p.wait(timeout=d)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=90)
    codes[p.returncode] += 1
    if p.returncode != 130:
        print(f"delay {d:.2f}: exit {p.returncode}: {err.strip()[-300:]}")
print(dict(codes))
