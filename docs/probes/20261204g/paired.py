import json,glob,statistics as st,sys
for f in sorted(glob.glob(sys.argv[1])):
    d=json.load(open(f))
    runs=d['confirmed']
    it=[(r['layout'],r['measured']['in_turn_s']) for r in runs if r.get('measured') and r['measured'].get('in_turn_s')]
    if not it: print(f,'none'); continue
    c=it[0][1]
    meds=[st.median(t) for _,t in it]
    best=min(range(len(it)),key=lambda i:meds[i])
    ratio_med=meds[0]/meds[best]-1
    pr=[st.median([a/b for a,b in zip(c,t)]) for _,t in it]
    bestp=max(range(len(it)),key=lambda i:pr[i])
    # fraction of rounds where chosen slower than the best-by-median
    print(f.split('/exp/')[1], len(it), len(c), f"ratio-of-medians {ratio_med*100:+.1f}%  paired-median vs its best {(pr[bestp]-1)*100:+.1f}%  paired vs median-best {(pr[best]-1)*100:+.1f}%")
