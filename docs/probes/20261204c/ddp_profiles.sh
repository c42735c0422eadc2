cd /work/main
for w in f21/w4 f21/w1 f17/w4 f18/w5 f19/w1; do
  n=$(echo $w | tr / _)
  world=$(python -c "import json;print(json.load(open('/work/exp/$w/runs.json'))['workload']['world'])")
  gb=$(python -c "import json;print(json.load(open('/work/exp/$w/runs.json'))['workload']['global_batch'])")
  mbs=$(python -c "print(','.join(map(str,sorted({1,2,4,$gb//$world}))))")
  echo "== $w world $world mbs $mbs $(date +%T)"
  python -m autoplan.cli profile model --model /work/exp/$w/shape.json --mbs $mbs --nproc $world --out /work/exp/ddp/$n.json 2>&1 | grep -v "^W1204\|^\*\*\*\|OMP_NUM" | tail -1
done
echo done $(date +%T)
