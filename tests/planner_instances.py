"""Small synthetic planner instances (random but seeded) for solver tests: no torch needed."""

from __future__ import annotations

import random

from autoplan.profile.formats import (ClusterProfile, DeviceSpec, LayerInfo, LayerKindProfile, LayerTiming,
                                      LinkFit, ModelProfile)


def random_model_profile(rng: random.Random, n_blocks: int | None = None, distinct_blocks: bool = False) -> ModelProfile:
    """A chain embed -> blocks -> head with random costs; blocks may differ from each other."""
    n_blocks = n_blocks if n_blocks is not None else rng.randint(1, 5)
    heads = rng.choice([2, 4, 8])
    shape = {"name": "rand", "layers": n_blocks, "hidden": 64, "heads": heads, "kv_heads": heads,
             "ffn_hidden": 256, "vocab": 128, "seq_len": 16}

    def kind(shardable: bool, scale: float) -> LayerKindProfile:
        base_f = rng.uniform(0.5, 2.0) * 1e-3 * scale
        timings = []
        for mbs in (1, 2, 4):
            timings.append(LayerTiming(mbs=mbs, tp=1, forward_s=base_f * (0.3 + mbs),
                                       backward_s=2 * base_f * (0.3 + mbs) * rng.uniform(0.9, 1.1),
                                       saved_activation_bytes=int(rng.uniform(1, 3) * 2**20 * mbs * scale),
                                       output_bytes=int(2**18 * mbs)))
        params = int(rng.uniform(0.5, 2.0) * 2**20 * scale)
        return LayerKindProfile(param_count=params, param_bytes=4 * params, tp_shardable=shardable, timings=timings)

    kinds = {"embed": kind(False, 0.3), "head": kind(False, 0.6)}
    layers = [LayerInfo("embed", "embed")]
    if distinct_blocks:
        for i in range(n_blocks):
            kinds[f"block{i}"] = kind(True, rng.uniform(0.5, 2.0))
            layers.append(LayerInfo(f"block.{i}", f"block{i}"))
    else:
        kinds["block"] = kind(True, 1.0)
        layers += [LayerInfo(f"block.{i}", "block") for i in range(n_blocks)]
    layers.append(LayerInfo("head", "head"))
    edges = [(a.name, b.name) for a, b in zip(layers, layers[1:])]
    return ModelProfile(model_spec="synthetic", shape=shape, precision="fp32", seq_len=16, layers=layers,
                        edges=edges, kinds=kinds, optimizer_step_s_per_param=rng.uniform(0.5, 2) * 1e-9)


def random_cluster(rng: random.Random, world: int | None = None, memory_bytes: int | None = None,
                   num_nodes: int = 1) -> ClusterProfile:
    world = world or rng.choice([1, 2, 4, 8])
    links = {}
    for cls, bw in (("intra_node", rng.uniform(1, 10) * 1e9), ("inter_node", rng.uniform(0.1, 1) * 1e9)):
        links[cls] = {op: {g: LinkFit(latency_s=rng.uniform(1, 50) * 1e-6 * g, bandwidth_bytes_per_s=bw / (1 + 0.1 * g))
                           for g in (2, 4, 8)} for op in ("all_reduce", "all_gather", "reduce_scatter", "send_recv")}
    return ClusterProfile(name="synthetic", num_nodes=num_nodes, devices_per_node=world // num_nodes,
                          device=DeviceSpec(type="cpu", memory_bytes=memory_bytes or int(rng.uniform(20, 200) * 2**20),
                                            compute_flops_per_s=1e10),
                          links=links)
