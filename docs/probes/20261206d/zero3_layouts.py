"""Every ZeRO-3 layout of the stored fidelity workloads: predicted against measured peak memory, beside the
size of the FSDP root unit (the layers not wrapped per block: embedding, head, final norm) and of one block.

    python docs/probes/20261206d/zero3_layouts.py '/work/exp/s2*/d*/w*'"""
import glob, json, sys

for f in sorted(g + "/runs.json" for a in sys.argv[1:] for g in glob.glob(a)):
    try:
        d = json.load(open(f))
    except FileNotFoundError:
        continue
    mp = json.load(open(f.replace("runs.json", "model.json")))
    root = sum(v["param_bytes"] for k, v in mp["kinds"].items() if k != "block")
    blk = mp["kinds"]["block"]["param_bytes"]
    for r in d["runs"]:
        L = r["layout"]
        if L.get("zero") == 3:
            p, m = r["predicted"]["peak_memory_bytes"], r["measured"]["peak_memory_bytes"]
            print(f"{f.split('/')[-3]} {f.split('/')[-2]} dp{L['dp']} pp{L['pp']} mbs{L['mbs']}x{L['num_microbatches']}: "
                  f"predicted {p / 2**20:.1f} MiB, measured {m / 2**20:.1f} MiB ({p / m - 1:+.1%}); root unit "
                  f"{root / 1e6:.1f} MB, a block {blk / 1e6:.1f} MB; torch {mp['environment'].get('torch')}")
