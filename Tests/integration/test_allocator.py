"""emberd runs on jemalloc, and the image it ships in installs every library it links.

The node links libjemalloc (Package.swift), which takes malloc over from glibc for the whole
process; a build that lost it would still run, only slower, so the node's status names the
allocator in use and this checks it on the binary the suite runs.
"""
import os
import re
import subprocess

import requests

from conftest import EMBERD, Node

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKERFILE = os.path.join(ROOT, "Dockerfile")
# Packages of Debian's slim base image: what the runtime stage need not install.
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}


def needed_libraries(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def package_of(library):
    """The Debian package that installed `library` on this machine, or None (not from apt, e.g.
    the Swift toolchain's runtime, which the image links statically)."""
    p = subprocess.run(["dpkg", "-S", library], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    for line in p.stdout.splitlines():
        pkg, path = line.split(": ", 1)
        if path.startswith(("/lib/", "/usr/lib/")) and path.endswith("/" + library):
            return pkg.split(":")[0]
    return None


def runtime_stage_packages():
    text = open(DOCKERFILE).read()
    stage = text.split("\nFROM ")[-1]  # the last stage is the image that runs emberd
    installs = re.findall(r"apt-get install ([^&\n]*(?:\\\n[^&\n]*)*)", stage)
    return {w for line in installs for w in line.replace("\\\n", " ").split() if not w.startswith("-")}


def test_a_node_mallocs_through_jemalloc(tmp_path):
    assert "libjemalloc.so.2" in needed_libraries(EMBERD)
    node = Node(data_dir=str(tmp_path / "d")).start()
    try:
        status = requests.get(node.url + "/.ember/status", timeout=10).json()
        assert status["allocator"] == "jemalloc"
        maps = open(f"/proc/{node.proc.pid}/maps").read()
        assert "libjemalloc.so.2" in maps
    finally:
        node.stop()


def allocator_metrics(node):
    text = requests.get(node.url + "/metrics", timeout=10).text
    found = {m.group(1): int(m.group(2)) for m in re.finditer(r'^ember_allocator_bytes\{kind="(\w+)"\} (\d+)$', text, re.M)}
    arenas = re.search(r"^ember_allocator_arenas (\d+)$", text, re.M)
    return found, int(arenas.group(1)) if arenas else None


def test_a_node_runs_one_arena_unless_malloc_conf_says_otherwise(tmp_path):
    """emberd's built-in jemalloc settings (Sources/CEmberMallocConf) give it one arena: with the
    default four per core a 1 GB import kept ~100 MiB more resident than it had allocated.
    MALLOC_CONF in the environment overrides them; /metrics shows both the count and the bytes."""
    node = Node(data_dir=str(tmp_path / "d")).start()
    try:
        requests.put(node.url + "/a.json", json={"k": "x" * 100_000}, timeout=10).raise_for_status()
        found, arenas = allocator_metrics(node)
        assert arenas == 1
        assert set(found) == {"allocated", "active", "resident", "mapped"}, found
        assert 0 < found["allocated"] <= found["active"] <= found["resident"] <= found["mapped"], found
    finally:
        node.stop()
    tuned = Node(data_dir=str(tmp_path / "e"), env={"MALLOC_CONF": "narenas:3"}).start()
    try:
        assert allocator_metrics(tuned)[1] == 3
    finally:
        tuned.stop()


def test_the_image_installs_every_library_emberd_links():
    wanted = {}
    for lib in needed_libraries(EMBERD):
        pkg = package_of(lib)
        if pkg is not None and pkg not in BASE_PACKAGES:
            wanted[lib] = pkg
    # The two the node cannot run without: the storage engine and the allocator.
    assert wanted.get("liblmdb.so.0") == "liblmdb0" and wanted.get("libjemalloc.so.2") == "libjemalloc2", wanted
    missing = {lib: pkg for lib, pkg in wanted.items() if pkg not in runtime_stage_packages()}
    assert not missing, f"the Dockerfile's runtime stage does not install {missing}"
