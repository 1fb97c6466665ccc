"""deploy/local-cluster as a Python module, for the programs that drive clusters from Python
(scripts/bench-snapshot.py, Tests/integration/cluster_helpers.py): the script has no .py suffix,
so it is loaded from its path. `SCRIPT` is its path, for running it as a command.

    import local_cluster
    lc = local_cluster.load()
"""
import importlib.machinery
import importlib.util
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "deploy", "local-cluster")
MODULE = "ember_local_cluster"


def load():
    """The script's module, executed once per process (later calls return the same module)."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    loader = importlib.machinery.SourceFileLoader(MODULE, SCRIPT)
    spec = importlib.util.spec_from_loader(MODULE, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[MODULE] = module
    return module
