"""A userspace TCP proxy for fault injection between cluster peers (tc netem is unavailable here).

One `Link` forwards one listening port to one target (one direction of one peer pair: Ember's
peer connections are one-way, the dialler writes). Each link can be switched at run time:

  pass       forward bytes (optionally delayed by `delay` seconds per chunk)
  drop       close every open connection and refuse new ones (a dead link: the peer redials)
  blackhole  keep connections open but discard every byte (a silent partition: no RST, no FIN)

The proxy runs an asyncio loop in a background thread; `Proxy.link(...)` and `Link.set(...)` are
called from the test's thread.
"""
import asyncio
import socket
import threading

CHUNK = 64 * 1024  # bytes read per chunk (a named bound on what one read buffers)


class Link:
    def __init__(self, proxy, target_port, name):
        self.proxy = proxy
        self.target_port = target_port
        self.name = name
        self.mode = "pass"
        self.delay = 0.0
        self.port = None
        self.conns = set()
        self.server = None

    def set(self, mode, delay=0.0):
        assert mode in ("pass", "drop", "blackhole")

        def apply():
            self.mode = mode
            self.delay = delay
            if mode == "drop":
                for w in list(self.conns):
                    w.transport.abort()
                self.conns.clear()
        self.proxy.call(apply)

    async def _pipe(self, reader, writer, sink):
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                if self.mode == "drop":
                    break
                if self.mode == "blackhole":
                    continue
                if self.delay:
                    await asyncio.sleep(self.delay)
                sink.write(data)
                await sink.drain()
        except (ConnectionError, asyncio.CancelledError, OSError):
            pass
        finally:
            for w in (writer, sink):
                self.conns.discard(w)
                w.transport.abort()

    async def _accept(self, reader, writer):
        if self.mode == "drop":
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self.conns.update((writer, up_writer))
        asyncio.ensure_future(self._pipe(reader, writer, up_writer))
        asyncio.ensure_future(self._pipe(up_reader, up_writer, writer))

    async def start(self):
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]


class Proxy:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.links = {}

    def call(self, fn):
        done = threading.Event()

        def run():
            try:
                fn()
            finally:
                done.set()
        self.loop.call_soon_threadsafe(run)
        done.wait(5)

    def link(self, name, target_port):
        link = Link(self, target_port, name)
        asyncio.run_coroutine_threadsafe(link.start(), self.loop).result(5)
        self.links[name] = link
        return link

    def close(self):
        async def stop():
            for link in self.links.values():
                link.server.close()
                for w in list(link.conns):
                    w.transport.abort()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class ReservedPorts:
    """Distinct loopback ports held bound until `release()`: the proxy's links bind ephemeral
    ports too, and a port picked then let go could be handed to a link before its node binds it
    (a node then fails with "address already in use")."""

    def __init__(self, n):
        self.sockets = []
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            self.sockets.append(s)
        self.ports = [s.getsockname()[1] for s in self.sockets]

    def release(self):
        for s in self.sockets:
            s.close()
        self.sockets = []
