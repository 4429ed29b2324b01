#!/usr/bin/env python3
"""Every binary's --help lists its own flags, and --version names the build.

1. `<binary> --help` lists flags the binary itself defines (each in the
   project's library files, which abseil's default filter never matched:
   it printed "No flags matched"), with their defaults. The CLI lists one
   --chat and no --gen_chat.
2. docs/FLAGS.md is what scripts/gen-flags-doc.py makes of these --help
   texts: the flag reference cannot drift from the code.
3. `<binary> --version` exits 0 and prints "pdserve <version> (commit <c>)":
   the version of the root CMakeLists.txt's project(), and, when the source
   tree is a git checkout, a commit of it.

Usage: program_flags_test.py BIN_DIR SOURCE_DIR
"""
import importlib.util
import os
import re
import subprocess
import sys

# Flags each binary must list: its own, from its own folder and from the
# shared libraries it links.
OWN_FLAGS = {
    'pdserve-router': ['decode', 'prefill', 'listen', 'model', 'tls_cert', 'metrics_port'],
    'pdserve-prefill': ['kv_transport', 'listen', 'model', 'threads', 'device', 'kv_secret_file',
                        'drain_timeout_ms', 'port_file', 'prefix_cache', 'tls_cert'],
    'pdserve-decode': ['kv_listen', 'kv_advertise', 'kv_wait_ms', 'listen', 'model', 'threads',
                       'kv_secret_file', 'drain_timeout_ms', 'port_file', 'prefix_cache'],
    'pdserve': ['chat', 'system', 'prompt', 'router', 'demo_prompt', 'max_tokens', 'model',
                'threads'],
}
# Flags a binary must not list.
ABSENT_FLAGS = {'pdserve': ['gen_chat']}


def run(binary, flag):
    return subprocess.run([binary, flag], capture_output=True, text=True, timeout=60)


def project_version(source_dir):
    with open(os.path.join(source_dir, 'CMakeLists.txt'), encoding='utf-8') as f:
        m = re.search(r'project\(pdserve VERSION (\S+)', f.read())
    return m.group(1) if m else None


def is_git_checkout(source_dir):
    r = subprocess.run(['git', '-C', source_dir, 'rev-parse', 'HEAD'], capture_output=True)
    return r.returncode == 0


def is_commit(source_dir, commit):
    r = subprocess.run(['git', '-C', source_dir, 'cat-file', '-e', commit + '^{commit}'],
                       capture_output=True)
    return r.returncode == 0


def check_help(binary, name):
    errors = []
    r = run(binary, '--help')
    out = r.stdout + r.stderr
    if 'No flags matched' in out:
        errors.append(f'{name} --help: "No flags matched"')
    for flag in OWN_FLAGS[name]:
        # abseil: "    --name (help text); default: value;"
        if not re.search(r'^\s+--%s \(' % re.escape(flag), out, re.M):
            errors.append(f'{name} --help does not list --{flag}')
    for flag in ABSENT_FLAGS.get(name, []):
        if re.search(r'--%s\b' % re.escape(flag), out):
            errors.append(f'{name} --help lists --{flag}')
    if 'default:' not in out:
        errors.append(f'{name} --help shows no defaults')
    if errors:
        errors.append(f'{name} --help printed:\n{out}')
    return errors


def check_version(binary, name, version, source_dir, git_checkout):
    r = run(binary, '--version')
    out = r.stdout.strip()
    m = re.fullmatch(r'pdserve (\S+) \(commit ([0-9a-f]+|unknown)\)', out)
    if r.returncode != 0 or not m:
        return [f'{name} --version exited {r.returncode} and printed {out!r}{r.stderr!r}']
    errors = []
    if m.group(1) != version:
        errors.append(f'{name} --version: version {m.group(1)}, CMakeLists.txt says {version}')
    commit = m.group(2)
    if git_checkout and (commit == 'unknown' or not is_commit(source_dir, commit)):
        errors.append(f'{name} --version: {commit!r} is not a commit of {source_dir}')
    return errors


def check_flags_doc(bin_dir, source_dir):
    spec = importlib.util.spec_from_file_location(
        'gen_flags_doc', os.path.join(source_dir, 'scripts', 'gen-flags-doc.py'))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with open(os.path.join(source_dir, 'docs', 'FLAGS.md'), encoding='utf-8') as f:
        if f.read() != gen.render(bin_dir):
            return ['docs/FLAGS.md differs from the binaries\' --help; '
                    'run scripts/gen-flags-doc.py build/bin']
    return []


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    bin_dir, source_dir = sys.argv[1], sys.argv[2]
    version = project_version(source_dir)
    if version is None:
        print('no project(pdserve VERSION ...) in CMakeLists.txt')
        return 1
    git_checkout = is_git_checkout(source_dir)
    errors = []
    for name in OWN_FLAGS:
        binary = os.path.join(bin_dir, name)
        if not os.access(binary, os.X_OK):
            errors.append(f'{binary} is not built')
            continue
        errors += check_help(binary, name)
        errors += check_version(binary, name, version, source_dir, git_checkout)
    if not errors:
        errors += check_flags_doc(bin_dir, source_dir)
    for e in errors:
        print('FAIL:', e)
    if not errors:
        print(f'ok: {len(OWN_FLAGS)} binaries list their flags (as docs/FLAGS.md does) '
              f'and print version {version}')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
