"""Over every stored fidelity log: does measured / predicted fall with the micro-batch size? (pairs of the same layout at two sizes; within-workload slope per micro-batch)"""
import glob, re, os, math, collections, statistics
rows=[]
for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "*", "seed*.log"))):
    cur=None; sect=None
    for line in open(f):
        m=re.match(r"== (random-\d+-\d+)(.*)",line)
        if m:
            cur=m.group(1); sect="turn" if "timed again in turn in one job" in m.group(2) else ("job2" if "second job" in m.group(2) else "first")
            continue
        m=re.match(r"([* ]) (dp\d+ tp\d+ pp\d+ .*?)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+[+-]\d+\.\d+%.*in turn",line)
        if m and cur and sect in("turn","job2"):
            lay=m.group(2).strip()
            mm=re.search(r"mbs(\d+)x(\d+)",lay)
            key=re.sub(r"mbs\d+x\d+","MBS",lay)
            rows.append((os.path.basename(f),cur,sect,lay,key,int(mm.group(1)),int(mm.group(2)),float(m.group(3)),float(m.group(4)),m.group(1)=="*"))
print(len(rows))
# pairs same key differing mbs
d=collections.defaultdict(list)
for r in rows: d[(r[0],r[1],r[2],r[4])].append(r)
res=collections.defaultdict(list)
for k,v in d.items():
    for a in v:
        for b in v:
            if a[5]<b[5]:
                x=math.log(b[8]/a[8])-math.log(b[7]/a[7])  # measured large/small vs predicted
                fam="pp" if "pp1 " not in a[3] else "dp"
                res[(k[2],fam)].append(x)
for k,v in sorted(res.items()):
    print(k,len(v),"mean %.3f median %.3f  frac<0 %.2f"%(statistics.mean(v),statistics.median(v),sum(x<0 for x in v)/len(v)))
print("--- within-workload fit meas-pred = c_w + e*m (turn tables), by log commit")
import numpy as np
for sel in ["all","4c315e2|8033773|f2c0d09|fae0b24|eed1474"]:
  for fam in ["dp","pp"]:
    X=[];Y=[];W=collections.defaultdict(list)
    for r in rows:
        if r[2]!="turn": continue
        if sel!="all" and not re.search(sel,r[0]): continue
        f="pp" if "pp1 " not in r[3] else "dp"
        if f!=fam: continue
        W[(r[0],r[1])].append(r)
    xs=[];ys=[]
    for k,v in W.items():
        if len(v)<2: continue
        mm=statistics.mean(r[6] for r in v); rr=statistics.mean((r[8]-r[7])/r[7] for r in v)
        for r in v:
            xs.append(r[6]-mm); ys.append((r[8]-r[7])/r[7]-rr)
    xs=np.array(xs);ys=np.array(ys)
    b=(xs*ys).sum()/(xs*xs).sum()
    print(sel[:10],fam,len(xs),"slope of rel. error per micro-batch: %.4f"%b)
