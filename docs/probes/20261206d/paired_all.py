"""../20261206c/paired.py with seed 20261254's variants.py output added: each pre-registered arm against head
on the workloads drawn after the arm was written down, paired per workload.

    python docs/probes/20261206d/paired_all.py"""
import os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "20261206c"))
from paired import FILES, main   # noqa: E402

if __name__ == "__main__":
    main(FILES + [os.path.join(HERE, "variants_s54.out")])
