"""The machine's raw speed over time: P processes (one per core), each timing a fixed block of single-thread
matmul work back to back for D seconds. Prints per-window medians of the block's wall and CPU time."""
import sys, time, json, statistics, multiprocessing as mp

def worker(i, dur, q):
    import torch
    torch.set_num_threads(1)
    a = torch.randn(256, 256); b = torch.randn(256, 256)
    out = []
    t_end = time.time() + dur
    while time.time() < t_end:
        w0 = time.perf_counter(); c0 = time.thread_time()
        for _ in range(60):
            a @ b
        out.append((time.time(), time.perf_counter() - w0, time.thread_time() - c0))
    q.put((i, out))

if __name__ == "__main__":
    P, D, win = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    mp.set_start_method("spawn"); q = mp.Queue()
    ps = [mp.Process(target=worker, args=(i, D, q)) for i in range(P)]
    [p.start() for p in ps]
    res = dict(q.get() for _ in ps); [p.join() for p in ps]
    t0 = min(r[0][0] for r in res.values())
    meds = []
    for k in range(int(D // win)):
        ws, cs = [], []
        for r in res.values():
            ws += [x[1] for x in r if k * win <= x[0] - t0 < (k + 1) * win]
            cs += [x[2] for x in r if k * win <= x[0] - t0 < (k + 1) * win]
        if ws:
            meds.append(statistics.median(ws))
            print(f"{k*win:6.0f}-{(k+1)*win:4.0f} s  block wall {1e3*statistics.median(ws):6.1f} ms  cpu {1e3*statistics.median(cs):6.1f} ms  n={len(ws)}")
    print(f"window medians: min {1e3*min(meds):.1f} max {1e3*max(meds):.1f} ms, max/min {max(meds)/min(meds):.3f}")
    if len(sys.argv) > 4:
        json.dump({str(i): r for i, r in res.items()}, open(sys.argv[4], "w"))
