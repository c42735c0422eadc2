"""CPU seconds used per thread name over a window (utime+stime deltas), for python processes."""
import os, sys, time, collections
HZ = os.sysconf('SC_CLK_TCK')
def snap():
    d = {}
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            cmd = open(f'/proc/{pid}/cmdline','rb').read().split(b'\0')
            cmd = b' '.join(cmd[:4]).decode(errors='replace')[-40:]
            tasks = os.listdir(f'/proc/{pid}/task')
        except OSError: continue
        for t in tasks:
            try: s = open(f'/proc/{pid}/task/{t}/stat').read()
            except OSError: continue
            name = s[s.index('(')+1:s.rindex(')')]
            f = s[s.rindex(')')+2:].split()
            d[(pid, t)] = (cmd, name, (int(f[11]) + int(f[12])) / HZ)
    return d
w = float(sys.argv[1]); a = snap(); t0 = time.time(); time.sleep(w); b = snap(); dt = time.time() - t0
agg = collections.Counter()
for k, (cmd, name, c) in b.items():
    c0 = a[k][2] if k in a else 0.0
    agg[(cmd, name)] += c - c0
tot = sum(agg.values())
print(f"window {dt:.1f} s, CPU used {tot:.1f} s ({tot/dt:.2f} cores)")
for (cmd, name), c in agg.most_common(12):
    if c > 0: print(f"{c:7.2f} s {c/dt:5.2f} cores  {name:18s} {cmd}")
