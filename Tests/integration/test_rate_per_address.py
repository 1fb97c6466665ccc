"""Request rate per client address (`--max-requests-per-second-per-address`): a client that opens a
new connection for every request is still limited, while another address is served. Real emberd,
real sockets from 127.0.0.1 and 127.0.0.2.
"""
import http.client
import json

from conftest import Node
from test_auth_limits import run, wire_connect


def rest(url, method, path, body=None, local_host=None):
    """One request on a fresh connection (optionally from another loopback address)."""
    host, port = url.replace("http://", "").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10, source_address=(local_host, 0) if local_host else None)
    try:
        conn.request(method, path, body=body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def test_rotating_connections_are_limited_per_address(ns):
    # Per-connection limit left at its default (1000/s): only the per-address budget can refuse.
    n = Node(extra_args=["--max-requests-per-second-per-address", "2", "--request-burst-per-address", "5"]).start()
    try:
        results = [rest(n.url, "PUT", f"/r/{i}.json?ns={ns}", body=str(i)) for i in range(12)]
        ok = [i for i, (status, _) in enumerate(results) if status == 200]
        refused = [body for status, body in results if status == 429]
        assert refused and refused[0] == {"error": "Too many requests"}, results
        assert len(ok) <= 6, results  # the burst (5), plus what refilled at 2/s meanwhile
        # Another address is served, and sees that refused writes wrote nothing.
        status, data = rest(n.url, "GET", f"/r.json?ns={ns}", local_host="127.0.0.2")
        assert status == 200
        written = {i for i, v in enumerate(data or []) if v is not None} if isinstance(data, list) else \
            {int(k) for k in (data or {})}
        assert written == set(ok)

        async def go():
            # A new WebSocket from the spent address: its messages share the same budget.
            a = await wire_connect(n.url, ns)
            _, resp = await a.request("g", {"p": "r", "q": {}})
            assert resp["s"] == "too_many_requests"
            assert resp["d"] == "Too many requests from this address (limit 2 per second)"
            b = await wire_connect(n.url, ns, local_host="127.0.0.2")
            _, resp = await b.request("p", {"p": "from-b", "d": 1})
            assert resp["s"] == "ok"
            await a.close()
            await b.close()
        run(go())
    finally:
        n.stop()
