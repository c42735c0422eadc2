#!/usr/bin/env bash
# Copies of seed 20261245's stored workloads that commits before eed1474 can read: their model profiles
# without the pipeline costs' relief_model key (eed1474 added it; older loaders refuse unknown keys).
# The other files are links to the originals.   bash strip.sh /work/exp/s17/d20261245 /tmp/p14/strip/s17/d20261245
set -euo pipefail
src=$1 dst=$2
for w in "$src"/w*; do
  n=$(basename "$w"); mkdir -p "$dst/$n"
  for f in "$w"/*; do [ "$(basename "$f")" = model.json ] || ln -sf "$f" "$dst/$n/"; done
  python - "$w/model.json" "$dst/$n/model.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d.get("pipeline_costs", []):
    c.pop("relief_model", None)
json.dump(d, open(sys.argv[2], "w"))
PY
done
