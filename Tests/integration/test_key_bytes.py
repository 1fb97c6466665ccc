"""Keys exactly as Firebase compares them (issue 40, item 3).

Keys are byte strings: `"\u00e9"` (é, NFC) and `"e\u0301"` (e + combining acute, NFD) are two keys,
though Swift's String `==` calls them equal. Key and string order is UTF-16 code units (the JS SDK's
`a < b`, Java's `compareTo`): characters above U+FFFF (surrogate pairs) sort before U+E000–U+FFFF,
where code point order puts them after. Shown through REST, the JS SDK (the wire protocol) and a
data directory of storage format 2 (0.4.0, code point order), migrated when it opens.
"""
import json
import os
import subprocess
import tarfile

import requests

from conftest import EMBERD, Node
from jssdk_helpers import run_sdk_script

NFC, NFD = "\u00e9", "e\u0301"
EMOJI, FULLWIDTH = "\U0001F600", "\uff01"
# UTF-16 order of the fixture's /uni keys (integer keys first).
UTF16_ORDER = ["10", "a", "z", "\u00e9", "\ud7ff", "\U00010000", "\U0001F600", "\ue000", "\uff01", "\uffff"]
FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "format2-text-order.tar.gz")
T = 10


def put(node, path, value, **kw):
    # ensure_ascii=False: the body carries the keys' own UTF-8 bytes, not \u escapes.
    return requests.put(f"{node.url}/{path}.json", data=json.dumps(value, ensure_ascii=False).encode(), timeout=T, **kw)


def patch(node, path, value):
    return requests.patch(f"{node.url}/{path}.json", data=json.dumps(value, ensure_ascii=False).encode(), timeout=T)


def get(node, path, **params):
    r = requests.get(f"{node.url}/{path}.json", params={k: json.dumps(v) if k in ("orderBy", "startAt", "endAt", "equalTo") else v
                                                      for k, v in params.items()}, timeout=T)
    assert r.status_code == 200, r.text
    return r.json()


def test_canonically_equivalent_keys_are_two_keys(node):
    assert put(node, "uni/a", {NFC: 1, NFD: 2}).status_code == 200
    assert get(node, "uni/a") == {NFC: 1, NFD: 2}
    assert get(node, f"uni/a/{NFC}") == 1 and get(node, f"uni/a/{NFD}") == 2
    # The same through \u escapes in the body.
    r = requests.put(f"{node.url}/uni/esc.json", data=json.dumps({NFC: 1, NFD: 2}), timeout=T)
    assert r.status_code == 200 and get(node, "uni/esc") == {NFC: 1, NFD: 2}
    # Two PATCHes: each key keeps its own name and value.
    assert patch(node, "uni/b", {NFC: 1}).status_code == 200
    assert patch(node, "uni/b", {NFD: 2}).status_code == 200
    assert get(node, "uni/b") == {NFC: 1, NFD: 2}
    assert sorted(get(node, "uni/b", shallow="true")) == sorted([NFC, NFD])
    # A delete of one leaves the other.
    assert requests.delete(f"{node.url}/uni/b/{NFD}.json", timeout=T).status_code == 200
    assert get(node, "uni/b") == {NFC: 1}
    # Values too: rewriting "é" as "e\u0301" is a change, stored and answered as written.
    assert put(node, "uni/v", NFC).status_code == 200
    assert put(node, "uni/v", NFD).status_code == 200
    assert requests.get(f"{node.url}/uni/v.json", timeout=T).content == json.dumps(NFD, ensure_ascii=False).encode()
    # A multi-path PATCH naming both.
    assert patch(node, "uni", {f"c/{NFC}": "x", f"c/{NFD}": "y"}).status_code == 200
    assert get(node, "uni/c") == {NFC: "x", NFD: "y"}


def test_key_and_string_order_is_utf16_code_units(tmp_path):
    rules = {"rules": {".read": True, ".write": True, "ord": {".indexOn": ["name"]}}}
    n = Node(data_dir=str(tmp_path / "d"), rules=rules).start()
    try:
        kids = {k: {"name": k + "-n"} for k in UTF16_ORDER}
        assert put(n, "ord", kids).status_code == 200
        assert list(get(n, "ord", orderBy="$key")) == UTF16_ORDER
        # A window proves the order on the server, not only in the rendering.
        assert list(get(n, "ord", orderBy="$key", limitToFirst=7)) == UTF16_ORDER[:7]
        assert list(get(n, "ord", orderBy="$key", startAt=EMOJI, endAt=FULLWIDTH)) == [EMOJI, "\ue000", FULLWIDTH]
        # Child values compared as strings, through the index.
        assert list(get(n, "ord", orderBy="name", limitToLast=4)) == UTF16_ORDER[-4:]
        assert list(get(n, "ord", orderBy="name", limitToFirst=7)) == UTF16_ORDER[:7]
        assert list(get(n, "ord", orderBy="name", startAt=EMOJI + "-n", limitToFirst=2)) == [EMOJI, "\ue000"]
    finally:
        n.stop()


def test_rules_name_keys_by_bytes(tmp_path):
    # A literal child's rules take precedence over the wildcard's: only the NFC key is refused.
    rules = {"rules": {".read": True, "r": {NFC: {".write": False}, "$other": {".write": True}}}}
    n = Node(data_dir=str(tmp_path / "d"), rules=rules).start()
    try:
        assert put(n, f"r/{NFC}", 1).status_code == 401  # Firebase's "Permission denied"
        assert put(n, f"r/{NFD}", 2).status_code == 200
        assert get(n, "r") == {NFD: 2}
    finally:
        n.stop()


def test_a_format_2_directory_is_migrated_to_utf16_order(tmp_path):
    with tarfile.open(FIXTURE) as t:
        t.extractall(tmp_path, filter="data")
    with open(tmp_path / "rules.json") as f:
        rules = json.load(f)
    n = Node(data_dir=str(tmp_path / "data"), rules=rules).start()
    try:
        assert list(get(n, "uni", orderBy="$key")) == UTF16_ORDER
        assert list(get(n, "uni", orderBy="$key", limitToFirst=7)) == UTF16_ORDER[:7]
        # The index (`.indexOn: name`) was rewritten too.
        assert list(get(n, "uni", orderBy="name", limitToFirst=7)) == UTF16_ORDER[:7]
        assert list(get(n, "uni", orderBy="name", startAt="\ue000-n")) == UTF16_ORDER[7:]
        assert get(n, f"uni/{EMOJI}") == {"name": EMOJI + "-n", "n": 6}
        assert get(n, f"deep/{FULLWIDTH}/{EMOJI}/x") == 1
        # Keys longer than the inline key limit (the overflow table) kept and ordered.
        long_keys = list(get(n, "long", orderBy="$key"))
        assert long_keys == [EMOJI * 150, FULLWIDTH * 200]
        assert get(n, "long/" + FULLWIDTH * 200) == {"v": FULLWIDTH}
        # Writes after the migration land in the new order.
        assert put(n, "uni/\uff02", {"name": "\uff02-n"}).status_code == 200
        assert list(get(n, "uni", orderBy="$key", limitToLast=2)) == ["\uff02", "\uffff"]
        status = requests.get(n.url + "/.ember/status", timeout=T).json()
        # Migrated all the way to the build's own format (read from `--version`, so a later
        # format change does not need this test edited), which is past format 2's order.
        assert status["build"]["storageFormat"] == current_storage_format() >= 3
    finally:
        n.stop()


def test_the_js_sdk_keeps_both_keys_and_agrees_on_the_order(node):
    out = run_sdk_script("""
        const { initializeApp, getDatabase, ref, set, get, query, orderByKey, limitToFirst, onChildAdded, goOffline } = sdk;
        const app = initializeApp({ databaseURL: `${args.url}?ns=keysjs` }, "keys-js");
        const db = getDatabase(app);
        const kids = {};
        for (const k of args.keys) kids[k] = k + "-n";
        await set(ref(db, "js/both"), { [args.nfc]: 1, [args.nfd]: 2 });
        await set(ref(db, "js/ord"), kids);
        const both = (await get(ref(db, "js/both"))).val();
        // The SDK orders children itself (UTF-16); the server answers the window.
        const local = [];
        (await get(ref(db, "js/ord"))).forEach((c) => { local.push(c.key); });
        const windowed = [];
        (await get(query(ref(db, "js/ord"), orderByKey(), limitToFirst(7)))).forEach((c) => { windowed.push(c.key); });
        goOffline(db);
        result({ both, local, windowed });
    """, {"url": node.url, "nfc": NFC, "nfd": NFD, "keys": UTF16_ORDER})
    assert out["both"] == {NFC: 1, NFD: 2}
    assert out["local"] == UTF16_ORDER
    assert out["windowed"] == UTF16_ORDER[:7]
    # What the SDK wrote over the wire, read over REST.
    assert get(node, "js/both", ns="keysjs") == {NFC: 1, NFD: 2}


def current_storage_format():
    out = subprocess.run([EMBERD, "--version"], capture_output=True, text=True, check=True).stdout
    return next(int(line.split()[2]) for line in out.splitlines() if line.startswith("storage format "))
