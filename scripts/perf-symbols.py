#!/usr/bin/env python3
# Summarises a `perf record -g` profile of emberd by function, inclusive or self share of samples.
# perf here cannot read the symbols of Swift release binaries ("build id ... not found"), so
# frames in the binary are resolved with nm and `swift demangle`.
#   perf record -e cpu-clock -F 999 -g -o /tmp/perf.data -- .build/release/emberd --data DIR --port P &
#   (load it, stop emberd with SIGTERM)
#   scripts/perf-symbols.py /tmp/perf.data $PWD/.build/release/emberd [inc|self] [N]
# The binary path must be the one perf recorded (absolute).
import sys, subprocess, bisect, re, collections
data, binary = sys.argv[1], sys.argv[2]
nm = subprocess.run(['nm', '-n', '--defined-only', binary], capture_output=True, text=True).stdout.split('\n')
addrs, names = [], []
for l in nm:
    p = l.split(' ', 2)
    if len(p) == 3 and p[1] in 'tTwW':
        addrs.append(int(p[0], 16)); names.append(p[2])
dem = subprocess.run(['swift', 'demangle', '--simplified'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
out = subprocess.run(['perf', 'script', '-i', data, '--show-mmap-events', '-F', 'comm,tid,ip,sym,dso'], capture_output=True, text=True).stdout
samples = []
cur = None
for line in out.split('\n'):
    if 'PERF_RECORD_MMAP' in line:
        continue
    if not line.strip():
        if cur: samples.append(cur)
        cur = None; continue
    if not line.startswith('\t') and not line.startswith(' '):
        cur = [line.split()[0]]; continue
    m = re.match(r'\s+([0-9a-f]+)\s+(.*)\s+\((.*)\)$', line)
    if not m or cur is None: continue
    ip, sym, dso = int(m.group(1), 16), m.group(2), m.group(3)
    if dso == binary:  # perf gives the offset in the file; its first LOAD segment maps at 0
        i = bisect.bisect_right(addrs, ip) - 1
        sym = dem[i] if i >= 0 else sym
    sym = re.sub(r'\+0x[0-9a-f]+$', '', sym)
    cur.append(sym[:160])
if cur: samples.append(cur)
n = len(samples)
selfc = collections.Counter(); inc = collections.Counter()
for s in samples:
    fr = s[1:]
    if fr: selfc[fr[0]] += 1
    for f in set(fr): inc[f] += 1
mode = sys.argv[3] if len(sys.argv) > 3 else 'inc'
c = inc if mode == 'inc' else selfc
for f, k in c.most_common(int(sys.argv[4]) if len(sys.argv) > 4 else 60):
    print(f"{100*k/n:5.1f}%  {f}")
