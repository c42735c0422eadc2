"""Job 1 against job 2: the same layouts timed in turn twice, one job after the other."""
import json,glob,sys,statistics as st
rows=[]; per=[]
for d in sys.argv[1:]:
    for rf in sorted(glob.glob(d+'/w*/runs.json')):
        r=json.load(open(rf))
        if 'judged' not in r: continue
        a=[x['measured']['step_time_s'] if x.get('measured') and x['measured'].get('in_turn_s') else None for x in r['confirmed']]
        b=[x['measured']['step_time_s'] if x.get('measured') and x['measured'].get('in_turn_s') else None for x in r['judged']]
        idx=[i for i in range(len(a)) if a[i] and b[i]]
        fa=min(a[i] for i in idx); fb=min(b[i] for i in idx)
        for i in idx: per.append(abs(a[i]/fa-b[i]/fb))
        pick=min(idx,key=lambda i:a[i])
        rows.append((rf.split('/')[-3]+'/'+rf.split('/')[-2], len(idx), a[0]/fa-1, b[0]/fb-1, pick, b[pick]/fb-1))
for n,k,m1,m2,p,p2 in rows:
    print(f"{n}: {k} layouts; model's choice {m1*100:+.1f}% (job 1) {m2*100:+.1f}% (job 2); pick {p}: {p2*100:+.1f}% (job 2)")
per.sort()
print(f"{len(rows)} workloads, {len(per)} layouts: |excess over the job's fastest, job 1 - job 2| median {st.median(per)*100:.1f}%, 90th pct {per[int(.9*len(per))]*100:.1f}%, max {per[-1]*100:.1f}%")
print(f"model's choice: job 1 within 5% on {sum(r[2]<=0.05 for r in rows)} of {len(rows)}, job 2 on {sum(r[3]<=0.05 for r in rows)}; pick on job 2 within 5% on {sum(r[5]<=0.05 for r in rows)}")
print(f"mean excess job 2: model {st.fmean(r[3] for r in rows)*100:.2f}%, pick {st.fmean(r[5] for r in rows)*100:.2f}%")
