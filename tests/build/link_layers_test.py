#!/usr/bin/env python3
"""The tree's layering, checked on the sources and on the router's link map.

1. No folder includes a folder above it: the folder include graph
   (common/<x>/, router/<room>/, tools/<room>/ and the process folders) has
   no cycle; every common/ folder, router room and tools room includes only
   the folders its layer allows; no router room includes engine code.
2. The router links no quant, engine, CPU-runner, KV, runtime, worker or GPU
   code (it serves from a ModelCard):
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
    'gguf': {'base'},
    'quant': {'gguf'},
    'request': set(),
    'tls': {'base'},
    'http': {'base', 'tls'},
    'text': {'base', 'gguf', 'quant'},
    'grammar': {'base', 'gguf', 'quant', 'text', 'request'},
    'model': {'base', 'gguf', 'quant', 'text'},
    'engine': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'grammar'},
    'cpu': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'grammar', 'engine'},
    # tls: the reloading TLS context of an encrypted KV plane (--kv_tls).
    'kv': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'grammar', 'engine', 'tls'},
    'runtime': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'grammar', 'engine', 'cpu'},
    'rpc': {'base'},
    'metrics': {'base', 'http'},
    'worker': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'grammar', 'engine', 'cpu',
               'kv', 'runtime', 'rpc', 'tls', 'http', 'metrics'},
    'gpu': {'base', 'gguf', 'quant', 'text', 'model', 'request', 'grammar', 'engine', 'kv', 'runtime'},
}
# Libraries of code the router must not carry.
FORBIDDEN = ['quant', 'engine', 'cpu', 'kv', 'runtime', 'worker', 'cuda', 'nccl']
# What each room of router/ and tools/ may include of its siblings (any
# common/ folder besides, but see FORBIDDEN for the router). 'router' is
# the composition root (router_server, main).
ROOMS = {
    'router/config': set(),
    'router/pool': {'router/config'},
    'router/placement': {'router/config', 'router/pool'},
    'router/call': {'router/config', 'router/pool', 'router/placement'},
    'router/api': {'router/config', 'router/pool', 'router/placement', 'router/call'},
    'router/api/openai': {'router/api'},
    'router': {'router/config', 'router/pool', 'router/placement', 'router/call', 'router/api',
               'router/api/openai'},
    'tools/bench': set(),
    'tools/cli': {'tools/bench'},
    'tools/bench/micro': {'tools/bench', 'tools/cli'},
}
INCLUDE = re.compile(r'^#include "((?:[a-z_]+/)+)[a-z0-9_]+\.(?:h|inc)"', re.M)
TOPS = ('common', 'router', 'prefill_worker', 'decode_worker', 'tools')


def folder_of(path):
    """common/<x>, the deepest known room of router/ or tools/, or the top folder."""
    parts = path.split('/')
    if parts[0] == 'common':
        return '/'.join(parts[:2])
    for depth in range(len(parts) - 1, 0, -1):
        folder = '/'.join(parts[:depth])
        if folder in ROOMS:
            return folder
    return parts[0]


def include_graph(src):
    graph = {}
    for top in TOPS:
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in files:
                if not f.endswith(('.h', '.cc', '.inc', '.cu')):
                    continue
                path = os.path.relpath(os.path.join(root, f), src)
                with open(os.path.join(src, path), encoding='utf-8') as fh:
                    targets = {folder_of(t + 'x.h') for t in INCLUDE.findall(fh.read())
                               if t.split('/')[0] in TOPS}
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
        if node in ROOMS:
            top = node.split('/')[0]
            for t in sorted(targets):
                if t.startswith('common/'):
                    if top == 'router' and t.split('/')[1] in FORBIDDEN + ['gpu']:
                        errors.append(f'{node} includes {t}, engine code the router must not carry')
                elif t.split('/')[0] == top and t not in ROOMS[node]:
                    errors.append(f'{node} includes {t}, a room above or beside it')
                elif t.split('/')[0] != top:
                    errors.append(f'{node} includes {t}, another program\'s folder')
            continue
        if not node.startswith('common/'):
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
    if 'rpc' not in members or 'model_card' not in members:
        errors.append(f'{map_path}: no member of libpdserve_rpc.a/libpdserve_model_card.a; '
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
    print('layering: no folder cycle, no upward include (common/, router/, tools/ rooms), '
          'router links no quant/engine/kv/gpu code')
    return 0


if __name__ == '__main__':
    sys.exit(main())
