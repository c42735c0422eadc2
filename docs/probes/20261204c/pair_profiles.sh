cd /tmp/exp24
for w in f20/w5 f19/w3 f20/w4 f17/w1 f20/w1 f16/w1; do
  n=$(echo $w | tr / _)
  world=$(python -c "import json;print(json.load(open('/work/exp/$w/runs.json'))['workload']['world'])")
  gb=$(python -c "import json;print(json.load(open('/work/exp/$w/runs.json'))['workload']['global_batch'])")
  mbs=$(python -c "print(','.join(map(str,sorted({1,2,4,$gb//$world}))))")
  echo "== $w world $world mbs $mbs $(date +%T)"
  PYTHONPATH=/tmp/exp24 python -m autoplan.cli profile model --model /work/exp/$w/shape.json --mbs $mbs --nproc $world --out /work/exp/pair2/$n.json 2>&1 | grep -v "^W1204\|^\*\*\*\|OMP_NUM" | tail -2
done
echo done $(date +%T)
