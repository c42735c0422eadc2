import json, statistics as st, random, sys
d = json.load(open(sys.argv[1])); rows = d["rows"]; R = len(rows)
def cur(sub):   # max over ranks of per-rank medians
    return [max(st.median(rows[r][k][q] for r in sub) for q in range(len(rows[0][k]))) for k in range(3)]
def medmax(sub):
    return [st.median(max(rows[r][k]) for r in sub) for k in range(3)]
def medmean(sub):
    return [st.median(st.mean(rows[r][k]) for r in sub) for k in range(3)]
def paired(sub):  # median over rounds of per-round ratio (of max over ranks)
    return [st.median(max(rows[r][k]) / max(rows[r][1]) for r in sub) for k in range(3)]
full = list(range(R))
for name, f in [("cur", cur), ("medmax", medmax), ("medmean", medmean)]:
    v = f(full); print(f"{name:8s} all {R}: per-sample ms", [round(x*1e3,1) for x in v], "r4/2 %.3f r1/2 %.3f" % (v[2]/v[1], v[0]/v[1]))
print("paired all: r4/2 %.3f r1/2 %.3f" % (paired(full)[2], paired(full)[0]))
random.seed(0)
for n in (7, 14, 21):
    for name, f in [("cur", cur), ("medmax", medmax), ("medmean", medmean), ("paired", paired)]:
        rs = []
        for _ in range(400):
            s = random.sample(full, n) if n < R else full
            v = f(s); rs.append(v[2]/v[1] if name != "paired" else v[2])
        rs.sort(); print(f"n={n:2d} {name:8s} r4/2 5-95%: {rs[20]:.3f} .. {rs[380]:.3f}  sd {st.pstdev(rs):.3f}")
# drift: per round mean
print("per-round max (ms) mbs2:", [round(max(r[1])*1e3) for r in rows])
print("rank spread mbs2 (max/min):", [round(max(r[1])/min(r[1]),2) for r in rows][:15])
