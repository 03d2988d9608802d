"""The network operators are placed on: nodes, links and their latencies.

A link's latency is its ``latency_ms`` or, for the Topology Zoo and SNDlib
graphs of the ``topohub`` package (which give lengths), ``dist`` km / 200:
light in fibre covers 200 km per millisecond. Between two nodes data takes
the shortest path, so the model's latency of a node pair is that path's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semiactive.errors import UserError

FIBRE_KM_PER_MS = 200.0
EXAMPLES = "topozoo/Abilene, sndlib/germany50"


class NetworkError(UserError):
    """A topology that cannot be placed on, with what is wrong and where."""


@dataclass(frozen=True)
class Link:
    a: int
    b: int
    latency_ms: float


class Network:
    """Named nodes, undirected links, and all-pairs shortest-path latencies.

    A node is known by its name and by its id in the topology file (``ids``,
    the names themselves when not given): :meth:`node` takes either.
    ``placeable[n]`` is False for a node operators may not go to (the
    seed's dummy source stands on one such node)."""

    def __init__(
        self, name: str, nodes: Sequence[str], links: Sequence[Link], ids: Sequence[str] | None = None
    ) -> None:
        if len(set(nodes)) != len(nodes):
            dup = sorted({n for n in nodes if list(nodes).count(n) > 1})[0]
            raise NetworkError(f"{name}: node {dup!r} appears twice")
        if not nodes:
            raise NetworkError(f"{name}: the topology has no node")
        self.name = name
        self.nodes = list(nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.ids = list(nodes) if ids is None else list(ids)
        if len(self.ids) != len(self.nodes):
            raise NetworkError(f"{name}: {len(self.ids)} ids for {len(self.nodes)} nodes")
        self.id_index = {n: i for i, n in enumerate(self.ids)}
        self.links = list(links)
        size = len(self.nodes)
        weights: dict[tuple[int, int], float] = {}
        for link in self.links:
            if not link.latency_ms > 0 or not np.isfinite(link.latency_ms):
                raise NetworkError(
                    f"{name}: link {self.nodes[link.a]!r} - {self.nodes[link.b]!r} has latency "
                    f"{link.latency_ms} ms; it must be a positive number"
                )
            key = (min(link.a, link.b), max(link.a, link.b))
            weights[key] = min(weights.get(key, np.inf), link.latency_ms)
        rows = [a for a, _ in weights] + [b for _, b in weights]
        cols = [b for _, b in weights] + [a for a, _ in weights]
        data = list(weights.values()) * 2
        # Imported here: node processes import this module, only a network block uses it.
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import dijkstra

        graph = csr_matrix((data, (rows, cols)), shape=(size, size))
        self.latency_ms, self._previous = dijkstra(graph, directed=False, return_predecessors=True)
        unreachable = np.argwhere(~np.isfinite(self.latency_ms))
        if len(unreachable):
            a, b = unreachable[0]
            raise NetworkError(f"{name}: no path between {self.nodes[a]!r} and {self.nodes[b]!r}")
        self.placeable = np.ones(size, dtype=bool)
        # Where to draw each node (longitude, latitude for topohub graphs), when known.
        self.positions: dict[str, tuple[float, float]] = {}
        self.title = name  # what a page calls it (the graph's own name, when it has one)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, name: str) -> int:
        """The index of the node of this name or, failing that, this id."""
        found = self.find(name)
        if found is None:
            raise NetworkError(self.not_found(name))
        return found

    def find(self, name: str) -> int | None:
        index = self.index.get(name)
        return self.id_index.get(name) if index is None else index

    def not_found(self, name: str, shown: int = 8) -> str:
        """Why ``name`` names no node: neither a name nor an id, and some that are."""
        nodes = [n if n == i else f"{n} (id {i})" for n, i in zip(self.nodes, self.ids, strict=True)]
        more = f", ... ({len(nodes)} in all)" if len(nodes) > shown else ""
        return (
            f"{name!r} is neither the name nor the id of a node of {self.name} "
            f"(nodes: {', '.join(nodes[:shown])}{more})"
        )

    def path(self, a: int, b: int) -> list[tuple[int, int]]:
        """The links (node pairs, in order) of the shortest path from a to b."""
        hops: list[tuple[int, int]] = []
        while b != a:
            prev = int(self._previous[a, b])
            hops.append((prev, b))
            b = prev
        return hops[::-1]

    def mean_latency_ms(self) -> float:
        """Mean latency over ordered pairs of distinct placeable nodes."""
        idx = np.flatnonzero(self.placeable)
        if len(idx) < 2:
            return 0.0
        sub = self.latency_ms[np.ix_(idx, idx)]
        return float(sub.sum() / (len(idx) * (len(idx) - 1)))

    def with_dummy(self, name: str = "dummy") -> Network:
        """A copy with one more node, unplaceable, at the mean latency from
        every node (the seed's dummy information source, 4.1). It is joined
        to the matrix only, never to links, so no path runs through it."""
        mean = self.mean_latency_ms()
        other = Network.__new__(Network)
        other.name = self.name
        other.nodes = [*self.nodes, name]
        other.index = {n: i for i, n in enumerate(other.nodes)}
        other.ids = [*self.ids, name]
        other.id_index = {n: i for i, n in enumerate(other.ids)}
        other.links = list(self.links)
        size = len(other.nodes)
        other.latency_ms = np.full((size, size), mean)
        other.latency_ms[:-1, :-1] = self.latency_ms
        other.latency_ms[-1, -1] = 0.0
        other._previous = np.full((size, size), -9999)
        other._previous[:-1, :-1] = self._previous
        other._previous[-1, :-1] = size - 1
        other._previous[:-1, -1] = np.arange(size - 1)
        other.placeable = np.append(self.placeable, False)
        other.positions = dict(self.positions)
        other.title = self.title
        return other


def from_node_link(data: Mapping[str, Any], name: str) -> Network:
    """A networkx node-link dict (``nodes`` with ``id`` and optional
    ``name``; ``edges`` or ``links`` with ``source``, ``target`` and
    ``latency_ms`` or ``dist`` in km)."""
    if not isinstance(data, Mapping):
        raise NetworkError(f"{name}: a node-link topology is a JSON object")
    nodes_data = data.get("nodes")
    edges_data = data.get("edges", data.get("links"))
    if not isinstance(nodes_data, list) or not isinstance(edges_data, list):
        raise NetworkError(f"{name}: a node-link topology has lists 'nodes' and 'edges' (or 'links')")
    ids: dict[Any, int] = {}
    names: list[str] = []
    for i, node in enumerate(nodes_data):
        if not isinstance(node, Mapping) or "id" not in node:
            raise NetworkError(f"{name}: nodes[{i}] has no 'id'")
        ids[_key(node["id"])] = i
        names.append(str(node.get("name", node["id"])))
    if len(set(names)) != len(names):
        names = [str(node["id"]) for node in nodes_data]  # duplicate names: fall back to ids
    links = []
    for i, edge in enumerate(edges_data):
        if not isinstance(edge, Mapping):
            raise NetworkError(f"{name}: edges[{i}] is not an object")
        try:
            a, b = ids[_key(edge.get("source"))], ids[_key(edge.get("target"))]
        except KeyError:
            raise NetworkError(f"{name}: edges[{i}] joins a node that is not in 'nodes'") from None
        if a == b:
            continue
        if "latency_ms" in edge:
            latency = edge["latency_ms"]
        elif "dist" in edge:
            latency = edge["dist"] / FIBRE_KM_PER_MS if isinstance(edge["dist"], (int, float)) else None
        else:
            raise NetworkError(f"{name}: edges[{i}] has neither 'latency_ms' nor 'dist' (km)")
        if not isinstance(latency, (int, float)) or isinstance(latency, bool):
            raise NetworkError(f"{name}: edges[{i}]: the latency is not a number")
        # A zero-length link (two sites in one city) still takes a little time.
        links.append(Link(a, b, float(latency) or 0.001))
    network = Network(name, names, links, [_key(node["id"]) for node in nodes_data])
    graph = data.get("graph")
    if isinstance(graph, Mapping) and isinstance(graph.get("name"), str):
        network.title = graph["name"]
    for node, label in zip(nodes_data, names, strict=True):
        pos = node.get("pos")
        if isinstance(pos, list) and len(pos) == 2 and all(isinstance(v, (int, float)) for v in pos):
            network.positions[label] = (float(pos[0]), float(pos[1]))
    return network


def _key(value: Any) -> str:
    return str(value)


def load_network(spec: str) -> Network:
    """``topohub:KEY`` (e.g. ``topohub:topozoo/Abilene``) or a node-link JSON file."""
    if spec.startswith("topohub:"):
        key = spec.removeprefix("topohub:")
        if not re.fullmatch(r"[A-Za-z0-9_-]+(/[A-Za-z0-9_.-]+)*", key) or ".." in key:
            raise NetworkError(f"{key!r} is not a topohub key (e.g. {EXAMPLES})")
        import topohub

        try:
            data = topohub.get(key)
        except (KeyError, OSError, ValueError):
            raise NetworkError(
                f"topohub has no topology {key!r} (e.g. topozoo/Abilene, sndlib/germany50)"
            ) from None
        return from_node_link(data, key)
    path = Path(spec)
    try:
        text = path.read_text()
    except OSError as exc:
        raise NetworkError(f"{spec}: cannot read the topology: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NetworkError(f"{spec}:{exc.lineno}: malformed JSON: {exc.msg}") from None
    return from_node_link(data, spec)
