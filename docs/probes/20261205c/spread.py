"""How far the fresh profiles' predictions move against each other: per workload block of a reprofile.py
output, each layout's prediction over the mean of its profile's predictions (so a profile measured on a
faster minute moves nothing), and the spread (max / min - 1) of that share across the fresh profiles;
printed per layout and as the workload's median.  usage: python spread.py OUT..."""
import re
import statistics
import sys

for path in sys.argv[1:]:
    print(path)
    blocks = re.split(r"^== ", open(path).read(), flags=re.M)[1:]
    for b in blocks:
        rows = [list(map(float, m.group(1).split())) for m in re.finditer(r"pred ([\d. ]+?)\s+job1", b)]
        if not rows:
            continue
        fresh = [r[1:] for r in rows]
        k = len(fresh[0])
        means = [statistics.mean(r[j] for r in fresh) for j in range(k)]
        spreads = [max(r[j] / means[j] for j in range(k)) / min(r[j] / means[j] for j in range(k)) - 1 for r in fresh]
        print(f"  {b.splitlines()[0]}: {k} fresh profiles, relative spread median {statistics.median(spreads):.1%}, "
              f"max {max(spreads):.1%}")
