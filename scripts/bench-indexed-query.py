"""orderByChild("score") + limitToLast(100) over REST on N children loaded by PATCHes of 10,000,
with .indexOn score (issue 17). Usage: bench-indexed-query.py path/to/emberd N  (run with the
integration venv: requests). Prints load time, query median/p90/max, data file size, load average."""
import json, os, subprocess, sys, time, tempfile, socket
import requests
binary, n = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp(prefix="s4q-")
rules = os.path.join(d, "rules.json")
open(rules, "w").write(json.dumps({"rules": {".read": True, ".write": True, "items": {".indexOn": ["score"]}}}))
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([binary, "--data", d + "/data", "--port", str(port), "--rules", rules], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
url = f"http://127.0.0.1:{port}"
try:
    for _ in range(100):
        try:
            requests.get(url + "/.json?shallow=true", timeout=1); break
        except Exception: time.sleep(0.1)
    t0 = time.time()
    for b in range(0, n, 10000):
        body = {f"c{i:07d}": {"score": i, "name": "n"} for i in range(b, min(n, b + 10000))}
        requests.patch(url + "/items.json?print=silent", data=json.dumps(body), timeout=300).raise_for_status()
    load = time.time() - t0
    sess = requests.Session()
    q = url + '/items.json?orderBy="score"&limitToLast=100'
    for _ in range(20): sess.get(q, timeout=10)
    ms = []
    for _ in range(200):
        t = time.perf_counter(); r = sess.get(q, timeout=10); ms.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200 and len(r.json()) == 100
    ms.sort()
    print(f"query median {ms[100]:.2f} ms p90 {ms[180]:.2f} ms max {ms[-1]:.2f} ms; load average {open('/proc/loadavg').read().split()[:3]}", flush=True)
    t = time.time()
    st = requests.get(url + "/.ember/status", timeout=120).json()["storage"]
    print(f"status answered in {time.time() - t:.1f} s")
    print(f"{os.path.basename(binary)}: {n} children loaded in {load:.1f} s; query median {ms[100]:.2f} ms p90 {ms[180]:.2f} ms max {ms[-1]:.2f} ms; "
          f"file {st['fileBytes']/1e6:.1f} MB; load average {open('/proc/loadavg').read().split()[:3]}")
finally:
    p.terminate()
    try:
        p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait()
    subprocess.run(["rm", "-rf", d])
