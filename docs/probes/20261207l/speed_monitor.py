"""The machine's speed over time, read in CPU time so that sharing the cores does not count.

Every --every-s seconds one single-thread block of fixed work (--products 128x128 fp32 matrix products) runs,
and one JSON line is appended to --out: the time, the block's wall seconds and its CPU seconds
(time.thread_time). On this VM the guest sees no steal (/proc/stat), so a slower host shows as more CPU
seconds for the same block. Duty: about 1% of one core at the defaults. Stops on SIGTERM / Ctrl-C."""
import argparse
import json
import signal
import sys
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--every-s", type=float, default=2.0)
    ap.add_argument("--products", type=int, default=150)
    args = ap.parse_args()
    torch.set_num_threads(1)
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    for _ in range(50):
        a @ b
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(args.out, "a") as f:
        while True:
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(args.products):
                a @ b
            w, c = time.perf_counter() - w0, time.thread_time() - c0
            f.write(json.dumps({"t": time.time(), "wall_s": w, "cpu_s": c}) + "\n")
            f.flush()
            time.sleep(max(0.0, args.every_s - w))


if __name__ == "__main__":
    main()
