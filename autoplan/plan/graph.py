"""The layer graph: a networkx DiGraph whose nodes are layers (with their costs for one outer
layout) and whose edges carry the bytes of the tensor flowing between them.

The placement ILP reads the graph, not the profile, so a model that is not a chain (skip
connections, encoder-decoder) is planned the same way: a layer may never sit on an earlier
pipeline stage than one of its predecessors, and every edge that crosses a stage boundary pays a
send/recv of the bytes it carries.
"""

from __future__ import annotations

import networkx as nx

from autoplan.errors import InputError
from autoplan.plan.coefficients import LayerCost
from autoplan.profile.formats import ModelProfile


def build_layer_graph(profile: ModelProfile, costs: dict[str, LayerCost] | None = None) -> nx.DiGraph:
    """Nodes in profile order with attribute ``cost`` (a LayerCost, when given) and ``kind``;
    edges with ``bytes`` (the producer's output per micro-batch, when costs are given)."""
    g = nx.DiGraph()
    for i, layer in enumerate(profile.layers):
        g.add_node(layer.name, kind=layer.kind, index=i, cost=costs[layer.name] if costs else None)
    for u, v in profile.edges:
        g.add_edge(u, v, bytes=costs[u].out_bytes if costs else 0)
    if not nx.is_directed_acyclic_graph(g):
        raise InputError("model profile: the layer graph has a cycle")
    index = nx.get_node_attributes(g, "index")
    for u, v in g.edges:
        if index[u] >= index[v]:
            raise InputError(f"model profile: layers must be listed in topological order ({u!r} -> {v!r})")
    return g


def is_chain(g: nx.DiGraph) -> bool:
    """True when the graph is a simple path through every node in order."""
    order = sorted(g.nodes, key=lambda n: g.nodes[n]["index"])
    return g.number_of_edges() == len(order) - 1 and all(g.has_edge(a, b) for a, b in zip(order, order[1:]))
