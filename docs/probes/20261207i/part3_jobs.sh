set -x
cd /work/main
S=/work/exp/s25/p1/shape.json
O=/work/exp/s25/p3
W=docs/probes/20261207i/jobpipe_worker.py
for args in "E1 --mbs 4" "E2 --mbs 4 --no-reference" "E3 --mbs 1" "E4 --mbs 1 --no-reference"; do
  set -- $args; name=$1; shift
  PYTHONPATH=/work/main timeout 600 python -m torch.distributed.run --standalone --nproc-per-node 4 $W --spec $S --chunks 3,2,3,2 "$@" --out $O/$name.json
  cat $O/$name.json; echo
done
