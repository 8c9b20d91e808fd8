#!/usr/bin/env bash
# Clang's thread-safety analysis (-Wthread-safety) over every translation unit
# that uses kvtier's annotated mutex (runtime/mutex.hpp): a GUARDED_BY member
# touched without its lock, or a REQUIRES function called without it, is an
# error. GCC, which builds kvtier, ignores the annotations; this checks them
# with clang++-14 in syntax-only mode, with the flags of an existing build's
# compile_commands.json (no second build tree).
#
#   scripts/thread-safety.sh [build-dir]      # default: build
#
# The same check as a build: cmake -DCMAKE_CXX_COMPILER=clang++-14
# -DKVTIER_THREAD_SAFETY_ANALYSIS=ON (warnings are errors there too).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
clang=${CLANGXX:-clang++-14}
[[ -f $build/compile_commands.json ]] || { echo "thread-safety: no $build/compile_commands.json (configure first)" >&2; exit 2; }
command -v "$clang" >/dev/null || { echo "thread-safety: $clang not found (set CLANGXX)" >&2; exit 2; }
python3 - "$build/compile_commands.json" "$clang" <<'PY'
import json, os, re, shlex, subprocess, sys
db, clang = sys.argv[1], sys.argv[2]
root = os.getcwd()
annotated = re.compile(rb'runtime/(mutex|worker_queue)\.hpp"')

def includes_annotations(path, seen):
    """True when `path` or a kvtier header it includes pulls in the annotated mutex."""
    if path in seen or not os.path.exists(path):
        return False
    seen.add(path)
    text = open(path, 'rb').read()
    if annotated.search(text):
        return True
    for inc in re.findall(rb'#include "([^"]+)"', text):
        if includes_annotations(os.path.join(root, inc.decode()), seen):
            return True
    return False

def sources_of(e):
    """The sources an entry compiles: a unity build's unit (KVTIER_UNITY_BUILD)
    stands for each source it includes, checked alone with the unit's flags."""
    f = e['file']
    if re.search(r'/Unity/unity_[^/]*\.cxx$', f):
        return re.findall(r'#include "([^"]+\.cpp)"', open(f).read())
    return [f]

units = []
for e in json.load(open(db)):
    for f in sources_of(e):
        if not f.endswith('.cpp') or not f.startswith(root + '/') or '/build' in f[len(root):]:
            continue
        if includes_annotations(f, set()):
            units.append((e, f))
failed = 0
for e, source in units:
    args = shlex.split(e['command']) if 'command' in e else e['arguments']
    while args and not args[0].startswith('-'):
        args = args[1:] # the launcher and the compiler
    keep, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ('-o', '-MF', '-MT'):
            skip = True
            continue
        if a in ('-c', '-MD', '-Wshadow=local', '-Winvalid-pch') or a == e['file'] or a.startswith('-Wno-restrict'):
            continue
        keep.append(a)
    # A precompiled header (KVTIER_PRECOMPILE_HEADERS) is GCC's: clang refuses
    # the .gch beside it. It only adds includes each source makes itself.
    while '-include' in keep and keep[keep.index('-include') + 1].endswith('cmake_pch.hxx'):
        i = keep.index('-include')
        del keep[i:i + 2]
    cmd = [clang, '-fsyntax-only', '-Wthread-safety', '-Wthread-safety-beta', '-Werror', '-Wno-unknown-warning-option'] + keep + [source]
    r = subprocess.run(cmd, cwd=e['directory'], capture_output=True, text=True)
    rel = os.path.relpath(source, root)
    if r.returncode != 0:
        failed += 1
        print(f'FAIL {rel}\n{r.stderr}', flush=True)
    else:
        print(f'ok   {rel}', flush=True)
print(f'thread-safety: {len(units) - failed} of {len(units)} translation units clean')
sys.exit(1 if failed else 0)
PY
