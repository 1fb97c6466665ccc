"""The default suite's short fault campaign (~2 minutes in all): a 3-node and a 5-node cluster
under every fault kind with fixed seeds; any anomaly fails the test and prints what the checkers
found. `make robustness` runs long campaigns (see RELIABILITY.md)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import campaign  # noqa: E402

SECONDS = float(os.environ.get("EMBER_CAMPAIGN_SECONDS", "45"))


@pytest.mark.parametrize("nodes,seed", [(3, 16), (5, 1016)])
def test_short_campaign_finds_no_anomaly(tmp_path, nodes, seed, capsys):
    rc = campaign.main(["--nodes", str(nodes), "--seconds", str(SECONDS), "--seed", str(seed), "--out", str(tmp_path)])
    out = capsys.readouterr().out
    print(out)
    assert rc == 0, out
    assert " 0 failed" in out, out
    with open(tmp_path / "summary.json") as f:
        summary = json.load(f)
    # The nemesis deals every fault kind once per round: a short run still sees most of them.
    assert len(summary["faults"]) >= 6, summary["faults"]
    assert summary["by_status"].get("ok", 0) > 500 and summary["events"] > 200 and summary["converged"]
