"""The newcomer path (README's first commands): deploy/local-cluster finds the binaries that were
built and reports every failure as one line, never a Python traceback."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import local_cluster  # noqa: E402
from local_cluster import ROOT, SCRIPT  # noqa: E402


def run_script(*args, env_overrides=None):
    env = {k: v for k, v in os.environ.items() if k not in ("EMBERD", "EMBER")}
    env.update(env_overrides or {})
    return subprocess.run([sys.executable, SCRIPT, *args], env=env, capture_output=True, text=True, timeout=60)


def assert_one_line_error(result, fragment):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0], lines[0]


def test_down_without_a_cluster_is_one_clear_line(tmp_path):
    assert_one_line_error(run_script("down", "--dir", str(tmp_path / "none")), "no cluster in")


def test_start_node_without_a_cluster_is_one_clear_line(tmp_path):
    assert_one_line_error(run_script("start-node", "--dir", str(tmp_path), "--id", "n1"), "no cluster in")


def test_a_missing_emberd_is_one_clear_line(tmp_path):
    result = run_script("up", "--nodes", "3", "--dir", str(tmp_path / "c"),
                        env_overrides={"EMBERD": str(tmp_path / "no-such-emberd")})
    assert_one_line_error(result, "is not an executable file")
    assert not (tmp_path / "c" / "cluster.json").exists()


def test_a_missing_admin_cli_is_one_clear_line(tmp_path):
    # emberd exists but the CLI beside it does not (a build of emberd alone).
    fake = tmp_path / "bin"
    fake.mkdir()
    os.symlink(os.environ["EMBERD"], fake / "emberd")
    result = run_script("up", "--nodes", "3", "--dir", str(tmp_path / "c"), env_overrides={"EMBERD": str(fake / "emberd")})
    assert_one_line_error(result, "admin CLI")


def test_binaries_are_found_release_first_without_emberd_set(monkeypatch):
    lc = local_cluster.load()
    monkeypatch.setattr(lc, "DEFAULT_EMBERD", None)
    found = lc.find_emberd()
    release = os.path.join(ROOT, ".build", "release", "emberd")
    expected = release if os.access(release, os.X_OK) else os.path.join(ROOT, ".build", "debug", "emberd")
    assert found == expected
    assert os.path.basename(lc.ember_cli(found)) == "ember" and os.access(lc.ember_cli(found), os.X_OK)
