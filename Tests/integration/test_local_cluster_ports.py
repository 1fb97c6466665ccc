"""deploy/local-cluster's ports: a cluster member cannot bind port 0 (its peers are told its
addresses before it starts), so `up` picks free ports and, when another process binds one before
the member does, starts the cluster again on other ports."""
import argparse
import json
import os
import socket
import sys

import pytest
import requests

from conftest import EMBERD, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import local_cluster  # noqa: E402

lc = local_cluster.load()


@pytest.mark.parametrize("which", ["client", "peer"])
def test_up_starts_again_on_other_ports_when_one_was_taken(tmp_path, monkeypatch, capsys, which):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    real = lc.free_ports
    picks = []

    def picking(count, taken_=()):
        ports = real(count, taken_)
        if not picks:
            # n1's port, as if another process bound it between the pick and n1's bind.
            ports[0 if which == "client" else 1] = taken
        picks.append(ports)
        return ports

    monkeypatch.setattr(lc, "free_ports", picking)
    dir_ = str(tmp_path / "c")
    try:
        lc.cmd_up(argparse.Namespace(nodes=3, dir=dir_, emberd=EMBERD, rules=None, log_level="info", extra=[]))
        assert len(picks) == 2, picks
        with open(os.path.join(dir_, "layout.json")) as f:
            layout = json.load(f)
        assert taken not in {p for n in layout["nodes"] for p in (n["port"], n["peerPort"])}
        assert "n1 found port" in capsys.readouterr().err
        with open(os.path.join(dir_, "n1.log"), errors="replace") as f:
            assert "Address already in use" in f.read()
        # The cluster that came up is whole: every member names the same leader, and a write
        # through one member is read through another.
        with open(os.path.join(dir_, "cluster.json")) as f:
            urls = [n["url"] for n in json.load(f)["nodes"]]
        lc.wait_leader(urls, 30)
        assert requests.put(urls[0] + "/x.json?ns=ports", json=1, headers={"Authorization": "Bearer owner"},
                            timeout=10).status_code == 200
        wait_for("the write, read through another member",
                 lambda: requests.get(urls[1] + "/x.json?ns=ports", headers={"Authorization": "Bearer owner"},
                                      timeout=10).json() == 1)
    finally:
        holder.close()
        if os.path.exists(os.path.join(dir_, "cluster.json")):
            lc.cmd_down(argparse.Namespace(dir=dir_))
