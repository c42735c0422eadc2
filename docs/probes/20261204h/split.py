import json,glob,statistics as st,sys
for d in sys.argv[1:]:
  for rf in sorted(glob.glob(d+'/w*/runs.json')):
    r=json.load(open(rf)); c=[x for x in r['confirmed'] if x.get('measured') and x['measured'].get('in_turn_s')]
    if not c or not r['confirmed'][0]['measured'].get('in_turn_s'): print(rf,'none'); continue
    T=[x['measured']['in_turn_s'] for x in c]; ch=r['confirmed'][0]['measured']['in_turn_s']
    cur=st.median(ch)/min(st.median(t) for t in T)-1
    n=len(ch)
    def half(sel,ev):
        i=min(range(len(T)),key=lambda k: st.median([T[k][j] for j in sel]))
        return st.median([ch[j] for j in ev])/st.median([T[i][j] for j in ev])-1
    a=list(range(0,n,2)); b=list(range(1,n,2)); f=list(range(n//2)); s=list(range(n//2,n))
    sp=(half(a,b)+half(b,a))/2; sp2=(half(f,s)+half(s,f))/2
    print(rf, len(T),'layouts; current %+.1f%%  split odd/even %+.1f%%  first/second half %+.1f%%'%(cur*100,sp*100,sp2*100))
