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


def test_longest_percent_encoded_url_is_accepted(node, ns):
    # 32 keys of 768 UTF-8 bytes, every byte percent-encoded: a 73,760-byte path.
    seg = "%C3%A9" * 384
    url = f"{node.url}/" + "/".join([seg] * 32) + f".json?ns={ns}"
    assert len(url) > 80 * 1024 - 8 * 1024
    put = requests.put(url, data='"x"')
    assert put.status_code == 200, put.text
    assert requests.get(url).json() == "x"
    # One byte more per key is Firebase's error, not the HTTP layer's.
    too_long = requests.put(f"{node.url}/" + "/".join([seg + "a"] + [seg] * 31) + f".json?ns={ns}", data='"x"')
    assert too_long.status_code == 400 and "769 bytes" in too_long.json()["error"]
