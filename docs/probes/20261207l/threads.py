"""Sample every thread of every process: count those in state R (running/runnable), by process cmd and thread name."""
import os, sys, time, collections
dur = float(sys.argv[1]); out = collections.Counter(); n = 0; tot = []
t_end = time.time() + dur
while time.time() < t_end:
    r = 0
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            tasks = os.listdir(f'/proc/{pid}/task')
            cmd = open(f'/proc/{pid}/cmdline','rb').read().split(b'\0')
            cmd = b' '.join(cmd[:4]).decode(errors='replace')[-60:]
        except OSError:
            continue
        for t in tasks:
            try:
                s = open(f'/proc/{pid}/task/{t}/stat').read()
            except OSError:
                continue
            name = s[s.index('(')+1:s.rindex(')')]
            st = s[s.rindex(')')+2]
            if st == 'R':
                out[(cmd, name)] += 1; r += 1
    tot.append(r); n += 1
    time.sleep(0.1)
print(f"samples {n}, mean runnable threads {sum(tot)/max(n,1):.2f}, max {max(tot) if tot else 0}")
for (cmd, name), c in out.most_common(25):
    print(f"{c/n:6.2f}  {name:18s} {cmd}")
