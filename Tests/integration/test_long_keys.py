"""Firebase's key and path limits through firebase-admin: 768-byte keys and 32-level paths of long
keys are stored, read back and ordered by key like Firebase; the longest percent-encoded URL of a
valid path is accepted by the HTTP layer."""
import requests

K768 = "k" * 768
SHARED = "m" * 500


def test_768_byte_keys_ordered_by_key(db):
    ref = db("long")
    kids = {K768: 1, SHARED + "b": 2, SHARED + "a": 3, SHARED: 4, "m": 5, "z": 6, "\u00e9" * 384: 7}
    ref.set(kids)
    assert ref.get() == kids
    assert ref.child(K768).get() == 1
    assert ref.child("\u00e9" * 384).get() == 7
    order = [K768, "m", SHARED, SHARED + "a", SHARED + "b", "z", "\u00e9" * 384]
    assert list(ref.order_by_key().get()) == order
    assert list(ref.order_by_key().limit_to_first(3).get()) == order[:3]
    assert list(ref.order_by_key().limit_to_last(2).get()) == order[-2:]
    assert list(ref.order_by_key().start_at(SHARED).end_at(SHARED + "\uf8ff").get()) == [SHARED, SHARED + "a", SHARED + "b"]
    assert list(ref.order_by_key().start_at(SHARED + "a").limit_to_first(2).get()) == [SHARED + "a", SHARED + "b"]
    assert ref.get(shallow=True) == {k: True for k in kids}
    ref.child(SHARED + "a").delete()
    assert list(ref.order_by_key().start_at(SHARED).limit_to_first(2).get()) == [SHARED, SHARED + "b"]


def test_thirty_two_levels_of_long_keys(db):
    segs = [chr(97 + i % 26) * 760 + str(i) for i in range(32)]
    deep = db("/".join(segs))
    deep.set("deep")
    assert deep.get() == "deep"
    parent = db("/".join(segs[:31]))
    parent.child("short").set(True)
    assert parent.get() == {segs[31]: "deep", "short": True}
    assert list(parent.order_by_key().get()) == [segs[31], "short"]
    value, etag = deep.get(etag=True)
    assert value == "deep" and etag.startswith("v")
    assert db(segs[0]).get(shallow=True) == {segs[1]: True}
    db(segs[0]).delete()
    assert db().get() is None


def test_longest_percent_encoded_url_is_accepted_and_longer_heads_get_414(node, ns):
    # 32 keys of 768 UTF-8 bytes, every byte percent-encoded: a 73,760-byte path. With an 8 KB
    # header the head exceeds the HTTP parser's default 80 KiB, which emberd raises.
    seg = "%C3%A9" * 384
    url = f"{node.url}/" + "/".join([seg] * 32) + f".json?ns={ns}"
    put = requests.put(url, data='"x"', timeout=30)
    assert put.status_code == 200, put.text
    assert requests.get(url, headers={"x-pad": "p" * 8000}, timeout=30).json() == "x"
    key_query = f"&orderBy=%22$key%22&startAt=%22{seg}%22&limitToFirst=1"
    assert requests.get(url.rsplit("/", 1)[0] + f".json?ns={ns}" + key_query, timeout=30).status_code == 200
    # One byte more in a key is Firebase's error, not the HTTP layer's.
    too_long = requests.put(f"{node.url}/" + "/".join([seg + "a"] + [seg] * 31) + f".json?ns={ns}", data='"x"', timeout=30)
    assert too_long.status_code == 400 and "769 bytes" in too_long.json()["error"]
    # A head beyond the parser's limits is answered (not left hanging) and writes nothing.
    huge = requests.put(f"{node.url}/" + "a" * 100_000 + f".json?ns={ns}", data='"y"', timeout=30)
    assert huge.status_code == 414 and "98304 bytes" in huge.json()["error"]
    big_header = requests.get(f"{node.url}/.json?ns={ns}", headers={"x-pad": "p" * 140_000}, timeout=30)
    assert big_header.status_code == 414
    assert requests.get(f"{node.url}/.json?ns={ns}&shallow=true", timeout=30).json() == {"\u00e9" * 384: True}
