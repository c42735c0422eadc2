import re,sys
sys.path.insert(0,'/work/main/docs/probes/20261205c')
def table(lines, i):
    rows, j = {}, i + 2
    chosen=None
    while j < len(lines) and lines[j].strip():
        m = re.search(r"\(in turn: median of \d+ steps", lines[j])
        if m:
            tokens = lines[j][1:].split()
            numbers = [k for k, t in enumerate(tokens) if re.match(r"^-?\d+\.\d+$", t)]
            name=" ".join(tokens[: numbers[0]])
            rows[name] = (float(tokens[numbers[0]]),float(tokens[numbers[0] + 1]))
            if lines[j].startswith('*'): chosen=name
        j += 1
    return rows,chosen
for path in sys.argv[1:]:
    lines=open(path).read().split("\n"); first={}
    for i,line in enumerate(lines):
        m = re.match(r"== (random-\S+), the chosen layout and those measured faster", line)
        if m: first[m.group(1)]=table(lines,i)
        m = re.match(r"== (random-\S+), the same layouts timed in turn again in a second job", line)
        if m and m.group(1) in first:
            (a,ch),(b,_) = first[m.group(1)], table(lines,i)
            both=[k for k in a if k in b]
            pool={k:(a[k][1]*b[k][1])**.5 for k in both}
            f1=min(v[1] for v in a.values()); f2=min(v[1] for v in b.values()); fp=min(pool.values())
            # model's predicted ordering: pred among both
            print(f"{path.split('/')[-1][:22]} {m.group(1):18s} job1 {a[ch][1]/f1-1:+.1%} job2 {b[ch][1]/f2-1:+.1%} pooled {pool[ch]/fp-1:+.1%}  n={len(both)}")
