"""`ls=<last session id>` (issue 40): an SDK that reconnects names its previous session in the
WebSocket URL, and the node ends that session at once, running its onDisconnect writes before
the new session's hello, instead of when the old socket's missing pong gives it away. Only a
session open on the same node and namespace is ended; an unknown id, another namespace's session
or one on another node of a cluster is left alone (Realtime/LastSession.swift).

The old sessions here are held open by a live client that answers pings, so nothing but `ls`
can end them.
"""
import asyncio
import time
import uuid

import pytest
import requests
import websockets

from cluster_helpers import cluster  # noqa: F401  (the module's 3-node cluster)
from wire import WireClient


def get(url, path, ns):
    return requests.get(f"{url}/{path}.json?ns={ns}", timeout=5).json()


async def present(url, ns, who):
    """A connection whose onDisconnect sets presence/<who> to "offline"; it says "online"."""
    c = await WireClient.connect(url, ns)
    for action, body in [("o", {"p": f"presence/{who}", "d": "offline"}),
                         ("p", {"p": f"presence/{who}", "d": "online"})]:
        _, r = await c.request(action, body)
        assert r["s"] == "ok", r
    assert get(url, f"presence/{who}", ns) == "online"
    return c


async def assert_alive(c, url, ns, who):
    """The connection still answers, and its onDisconnect has not run."""
    _, r = await c.request("g", {"p": f"presence/{who}"})
    assert r == {"s": "ok", "d": "online"}, r
    assert get(url, f"presence/{who}", ns) == "online"


def test_ls_ends_the_named_session_and_its_ondisconnect_runs_before_the_new_hello(node, ns):
    async def go():
        old = await present(node.url, ns, "u1")
        started = time.monotonic()
        new = await WireClient.connect(node.url, ns, params=f"&ls={old.session_id}")
        # The hello came once the old session was torn down: its onDisconnect write is in.
        assert get(node.url, "presence/u1", ns) == "offline"
        assert new.session_id != old.session_id
        # The old client got the server's close frame with the reason, then the socket closed.
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(old._recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
        assert closed.value.rcvd.reason == "replaced by a newer connection of the same client"
        elapsed = time.monotonic() - started
        # Far below the 30 s ping interval that would otherwise be the first sign of it.
        assert elapsed < 10, elapsed
        # The new session is a working one: presence set again after the old one's run.
        _, r = await new.request("p", {"p": "presence/u1", "d": "online"})
        assert r["s"] == "ok"
        assert get(node.url, "presence/u1", ns) == "online"
        # Its own onDisconnect works as usual.
        _, r = await new.request("o", {"p": "presence/u1", "d": "offline"})
        assert r["s"] == "ok"
        await new.close()
        deadline = time.time() + 30
        while get(node.url, "presence/u1", ns) != "offline":
            assert time.time() < deadline, "the new session's onDisconnect did not run"
            await asyncio.sleep(0.05)

    asyncio.run(go())


def test_ls_of_an_unknown_id_or_another_namespace_ends_nothing(node, ns):
    other = "t" + uuid.uuid4().hex[:12]

    async def go():
        old = await present(node.url, ns, "u2")
        # Each of these opens normally, and the old session is still there after its hello (the
        # node ends a named session before it sends the hello, so this is no race).
        for params in [f"&ls={'0' * 15}", "&ls=", "&ls=not-hex!", f"&ls={'a' * 65}"]:
            c = await WireClient.connect(node.url, ns, params=params)
            await assert_alive(old, node.url, ns, "u2")
            _, r = await c.request("p", {"p": "x", "d": 1})
            assert r["s"] == "ok"
            await c.close()
        c = await WireClient.connect(node.url, other, params=f"&ls={old.session_id}")
        await assert_alive(old, node.url, ns, "u2")
        await c.close()
        await old.close()

    asyncio.run(go())


def test_ls_naming_a_session_on_another_node_leaves_it_alone(cluster):  # noqa: F811
    """In a cluster the old session may live on another node: `ls` is ignored there (that node
    ends the session when its socket closes or stops answering pings; the leader runs its writes
    if that node dies). Nothing wrong happens: the old session keeps working, the new one works."""
    ns = "t" + uuid.uuid4().hex[:12]
    a, b = [n["url"] for n in cluster.nodes][:2]

    async def go():
        old = await present(a, ns, "u3")
        new = await WireClient.connect(b, ns, params=f"&ls={old.session_id}")
        await assert_alive(old, a, ns, "u3")
        _, r = await new.request("p", {"p": "presence/u4", "d": "here"})
        assert r["s"] == "ok"
        await new.close()
        await old.close()
        deadline = time.time() + 30
        while get(a, "presence/u3", ns) != "offline":
            assert time.time() < deadline, "the old session's onDisconnect did not run on its close"
            await asyncio.sleep(0.05)

    asyncio.run(go())
