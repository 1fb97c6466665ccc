#!/usr/bin/env python3
"""Issue 41's workload, scaled by flags: CHILDREN children with `.indexOn: ["score"]` (random
scores, keys in order) loaded into one emberd by PATCHes of BATCH children; prints the data
file, the tables' pages (`/.ember/status` storage, as `ember stats`) and bytes per JSON byte
right after the load, then after one online defrag (`POST /.ember/defrag`). Measures bytes and
page fill only, which do not depend on machine load (no timing claims beyond the defrag's own
reported pause).

    EMBERD=.build/debug/emberd scripts/defrag-footprint.py --children 200000 --batch 10000
"""
import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def call(method, url, body=None, timeout=600):
    req = urllib.request.Request(url, data=body, method=method, headers={"Authorization": "Bearer owner"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = r.read()
        return json.loads(data) if data else None


def storage(url):
    return call("GET", url + "/.ember/status")["storage"]


def describe(label, s, json_bytes, data_dir):
    size = os.path.getsize(os.path.join(data_dir, "data.mdb"))
    t = s["tables"]
    rows = ", ".join(f"{k} {t[k]['pages']} pages/{t[k]['entries']} entries" for k in ("tree", "versions", "index") if k in t)
    print(f"{label}: data.mdb {size / 2**20:.1f} MiB = {size / json_bytes:.2f} bytes per JSON byte; {rows}; "
          f"free {s['freePages']} pages ({s['freeBytes'] / 2**20:.1f} MiB)")
    return size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--children", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--write-during", action="store_true",
                    help="PUT single children one after another while the defrag runs (its pause then copies them too)")
    args = ap.parse_args()
    emberd = os.environ.get("EMBERD", os.path.join(ROOT, ".build", "debug", "emberd"))
    data_dir = tempfile.mkdtemp(prefix="ember-defrag-footprint-")
    rules = data_dir + "-rules.json"
    with open(rules, "w") as f:
        json.dump({"rules": {".read": True, ".write": True, "items": {".indexOn": ["score"]}}}, f)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(data_dir + ".log", "wb")
    proc = subprocess.Popen([emberd, "--data", data_dir, "--port", str(port), "--rules", rules], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                call("GET", url + "/.json?shallow=true", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        # A node builds a namespace's `.indexOn` indexes when it first queries it.
        call("GET", url + '/items.json?orderBy=%22score%22&limitToFirst=1')
        rng = random.Random(args.seed)
        json_bytes = 0
        for start in range(0, args.children, args.batch):
            body = json.dumps({f"c{i:07d}": {"score": rng.randrange(1_000_000_000), "name": "n"}
                               for i in range(start, min(args.children, start + args.batch))}, separators=(",", ":")).encode()
            json_bytes += len(body)
            call("PATCH", url + "/items.json?print=silent", body)
        print(f"loaded {args.children} children in {args.children // args.batch} PATCHes: {json_bytes / 1e6:.1f} MB of JSON")
        describe("after the load", storage(url), json_bytes, data_dir)
        stop, acked = threading.Event(), []

        def writer():
            i = 0
            while not stop.is_set():
                call("PUT", f"{url}/during/k{i:07d}.json?print=silent", str(i).encode())
                acked.append(i)
                i += 1

        w = threading.Thread(target=writer, daemon=True)
        if args.write_during:
            w.start()
        r = call("POST", url + "/.ember/defrag")
        stop.set()
        if args.write_during:
            w.join()
            during = call("GET", url + "/during.json?shallow=true") or {}
            assert len(during) == len(acked), (len(during), len(acked))
            print(f"{len(acked)} writes acknowledged while the defrag ran, all present")
        describe("after ember defrag", storage(url), json_bytes, data_dir)
        print(f"defrag: {r['bytesBefore'] / 2**20:.1f} MiB -> {r['bytesAfter'] / 2**20:.1f} MiB, writes paused {r['pauseMs']:.1f} ms, "
              f"copy {r['copyMs'] / 1000:.1f} s, {r['pauseKeys']} keys in the pause")
    finally:
        proc.terminate()
        proc.wait()
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
            os.remove(rules)
            os.remove(data_dir + ".log")
        else:
            print("data directory:", data_dir, file=sys.stderr)


if __name__ == "__main__":
    main()
