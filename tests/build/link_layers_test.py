#!/usr/bin/env python3
"""The tree's layering, checked on the sources and on the router's link map.

1. No folder under common/ includes a folder above it: the folder include
   graph (common/<x>/ and the top-level process folders) has no cycle, and
   every common/ folder includes only the folders its layer allows.
2. The router links no engine, CPU-runner, KV, runtime, worker or GPU code:
   its linker map (pdserve-router.map, written by the build) names no member
   of those libraries, and its link line names none of them.

Usage: link_layers_test.py SOURCE_DIR BINARY_DIR
"""
import os
import re
import sys

# What each common/ folder may include (besides itself), bottom first.
ALLOWED = {
    'base': set(),
    'quant': set(),
    'request': set(),
    'http': {'base'},
    'gguf': {'base', 'quant'},
    'text': {'base', 'gguf', 'quant'},
    'model': {'base', 'gguf', 'quant', 'text'},
    'engine': {'base', 'gguf', 'quant', 'text', 'model', 'request'},
    'cpu': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'engine'},
    'kv': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'engine'},
    'runtime': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'engine', 'cpu'},
    'rpc': {'base'},
    'metrics': {'base', 'http'},
    'worker': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'engine', 'cpu',
               'runtime', 'rpc', 'http', 'metrics'},
    'gpu': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'engine', 'kv', 'runtime'},
}
# Libraries of code the router must not carry.
FORBIDDEN = ['engine', 'cpu', 'kv', 'runtime', 'worker', 'cuda', 'nccl']
INCLUDE = re.compile(r'^#include "(common/[a-z_]+|router|prefill_worker|decode_worker|tools)/',
                     re.M)


def folder_of(path):
    parts = path.split('/')
    return '/'.join(parts[:2]) if parts[0] == 'common' else parts[0]


def include_graph(src):
    graph = {}
    for top in ['common', 'router', 'prefill_worker', 'decode_worker', 'tools']:
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in files:
                if not f.endswith(('.h', '.cc', '.inc', '.cu')):
                    continue
                path = os.path.relpath(os.path.join(root, f), src)
                with open(os.path.join(src, path), encoding='utf-8') as fh:
                    targets = set(INCLUDE.findall(fh.read()))
                node = folder_of(path)
                graph.setdefault(node, set()).update(t for t in targets if t != node)
    return graph


def find_cycle(graph):
    state = {}

    def visit(n, stack):
        state[n] = 'open'
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 'open':
                return stack + [n, m]
            if m not in state:
                found = visit(m, stack + [n])
                if found:
                    return found
        state[n] = 'done'
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n, [])
            if found:
                return found
    return None


def check_sources(src):
    errors = []
    graph = include_graph(src)
    cycle = find_cycle(graph)
    if cycle:
        errors.append('include cycle between folders: ' + ' -> '.join(cycle))
    for node, targets in sorted(graph.items()):
        if not node.startswith('common/'):
            if node == 'router':
                bad = {t for t in targets if t.split('/')[-1] in FORBIDDEN + ['gpu']}
                if bad:
                    errors.append(f'router includes {sorted(bad)}')
            continue
        name = node.split('/')[1]
        if name not in ALLOWED:
            errors.append(f'{node}: a common/ folder the layering does not know')
            continue
        for t in sorted(targets):
            if not t.startswith('common/'):
                errors.append(f'{node} includes {t}, a process folder')
            elif t.split('/')[1] not in ALLOWED[name]:
                errors.append(f'{node} includes {t}, a folder above it')
    return errors


def check_router_link(binary):
    errors = []
    map_path = os.path.join(binary, 'pdserve-router.map')
    with open(map_path, encoding='utf-8', errors='replace') as fh:
        link_map = fh.read()
    members = set(re.findall(r'libpdserve_([a-z_]+)\.a\(', link_map))
    if 'rpc' not in members or 'model' not in members:
        errors.append(f'{map_path}: no member of libpdserve_rpc.a/libpdserve_model.a; '
                      'is this the router\'s map?')
    for lib in FORBIDDEN:
        if lib in members:
            errors.append(f'the router links members of libpdserve_{lib}.a')
    with open(os.path.join(binary, 'build.ninja'), encoding='utf-8') as fh:
        ninja = fh.read()
    m = re.search(r'^build bin/pdserve-router: .*?(?=^build )', ninja, re.M | re.S)
    if not m:
        errors.append('build.ninja has no link step for bin/pdserve-router')
    else:
        for lib in FORBIDDEN:
            if f'libpdserve_{lib}.a' in m.group(0):
                errors.append(f'the router\'s link line names libpdserve_{lib}.a')
    return errors


def main():
    src, binary = sys.argv[1], sys.argv[2]
    errors = check_sources(src) + check_router_link(binary)
    for e in errors:
        print('FAIL:', e)
    if errors:
        return 1
    print('layering: no folder cycle, no upward include, router links no engine/kv/gpu code')
    return 0


if __name__ == '__main__':
    sys.exit(main())
