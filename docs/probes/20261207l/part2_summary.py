"""Part 2's H2 from part2_{shape}_job{1,2,3}.json."""
import json
import statistics

out = {}
for s in ("160x8", "192x6"):
    jobs = [json.load(open(f"part2_{s}_job{j}.json")) for j in (1, 2, 3)]
    for way in ("A", "B"):
        rows = []
        for m in ("1", "2", "4"):
            v = [j[way][m] for j in jobs]
            rows.append(max(v) / min(v))
            print(f"{s} {way} mbs {m}: " + " ".join(f"{x:.3f}" for x in v) + f"  max/min {rows[-1]:.3f}")
        out[(s, way)] = statistics.fmean(rows)
        print(f"{s} S_{way} = {out[(s, way)]:.3f}")
h2 = all(out[(s, "B")] < out[(s, "A")] and out[(s, "B")] <= 1.10 for s in ("160x8", "192x6"))
print(f"H2 (S_B < S_A and S_B <= 1.10 on both shapes): {'holds' if h2 else 'fails'}")
