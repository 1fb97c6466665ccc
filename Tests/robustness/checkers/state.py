"""At the end every node's state (the `stateHash` of `/.ember/status`) is equal."""
from .history import Anomaly


def check(final_records):
    hashes = {r["node"]: r.get("hash") for r in final_records}
    if len(set(hashes.values())) > 1:
        return [Anomaly("state", "nodes differ", f"state hashes {hashes}")]
    return []
