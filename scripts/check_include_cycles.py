#!/usr/bin/env python3
"""Fails when the module folders' include graph has a cycle.

Each source file's folder (relative to the repository root) is a node; an
`#include "a/b/c.h"` that names a file of this repository adds the edge
file's folder -> a/b. Edges within one folder are ignored. A cycle between
folders means two modules depend on each other, so neither can be built,
tested or read alone.

Usage: check_include_cycles.py [--repo ROOT] [--allow A,B ...]
Exit 1, printing the cycles and their edges, on a cycle not allowed by an
--allow (the exact set of folders of one known cycle).
"""
import argparse
import os
import re
import sys

SOURCE_DIRS = ("engine", "kernels", "server", "clients", "tests")
EXTENSIONS = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def folder_graph(root):
    graph = {}
    for top in SOURCE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            folder = os.path.relpath(dirpath, root)
            for name in files:
                if not name.endswith(EXTENSIONS):
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for target in INCLUDE.findall(text):
                    if not os.path.isfile(os.path.join(root, target)):
                        continue  # generated (proto/gen) or relative to the file's folder
                    dest = os.path.dirname(target)
                    if dest and dest != folder:
                        graph.setdefault(folder, set()).add(dest)
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm, iterative; returns the components of more than one folder."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]
    nodes = set(graph) | {d for ds in graph.values() for d in ds}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--allow", action="append", default=[],
                        help="comma-separated folders of a known cycle to tolerate")
    args = parser.parse_args()
    allowed = {frozenset(a.split(",")) for a in args.allow}
    root = os.path.abspath(args.repo)
    graph = folder_graph(root)
    cycles = [c for c in strongly_connected(graph) if frozenset(c) not in allowed]
    if not cycles:
        print(f"no include cycles among {len(graph)} folders")
        return 0
    for component in cycles:
        members = set(component)
        print("include cycle between folders: " + ", ".join(component))
        for folder in component:
            for dest in sorted(graph.get(folder, ()) & members):
                print(f"  {folder} -> {dest}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
