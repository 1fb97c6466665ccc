"""Point-in-time archive in an S3-compatible object store (issue 37): `emberd --archive
s3://bucket/prefix` against a real S3 server on loopback (moto's, from PyPI, with request
authentication on: every request's SigV4 signature is checked against an IAM user's key), then
`ember archive ls|verify` and `ember restore --archive s3://…` through the same server.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import boto3
import botocore
import pytest
import requests

from conftest import Node, wait_for
from test_pitr import EMBER, FAST, archive_status, served, wait_archived

BUCKET = "ember-archive"
PREFIX = "prod/pitr"
LOCATION = f"s3://{BUCKET}/{PREFIX}"
PART = 5 << 20  # --archive-s3-part-size 5MiB (S3's smallest part)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server; the first 4 requests (the IAM user, its policy and key, the bucket) are
    let through unauthenticated, every later one must be signed with the user's key."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"}, stdout=log, stderr=log)
    try:
        def up():
            assert proc.poll() is None, "moto_server exited"
            return requests.get(url + "/moto-api/", timeout=1).status_code == 200
        wait_for("moto_server up", up)
        anon = dict(endpoint_url=url, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="ember")
        iam.put_user_policy(UserName="ember", PolicyName="archive", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="ember")["AccessKey"]
        boto3.client("s3", **anon).create_bucket(Bucket=BUCKET)
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id=key["AccessKeyId"],
                              aws_secret_access_key=key["SecretAccessKey"])
        secret_file = str(tmp_path_factory.mktemp("s3key") / "secret")
        with open(secret_file, "w") as f:
            f.write(key["SecretAccessKey"] + "\n")
        yield {"url": url, "key": key["AccessKeyId"], "secret": key["SecretAccessKey"], "secret_file": secret_file, "client": client}
    finally:
        proc.terminate()
        proc.wait()
        log.close()


def ember_s3(s3, *args, check=True, secret=None):
    """`ember` with the credentials and endpoint in the environment, as the AWS tools take them."""
    env = {**os.environ, "AWS_ACCESS_KEY_ID": s3["key"], "AWS_SECRET_ACCESS_KEY": secret or s3["secret"],
           "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": s3["url"]}
    p = subprocess.run([EMBER, *args], capture_output=True, text=True, timeout=120, env=env)
    if check:
        assert p.returncode == 0, f"ember {' '.join(args)}: {p.returncode} {p.stdout} {p.stderr}"
    return p


def keys(s3):
    out = s3["client"].list_objects_v2(Bucket=BUCKET, Prefix=PREFIX + "/")
    return {o["Key"][len(PREFIX) + 1:]: o for o in out.get("Contents", [])}


def test_archive_list_verify_and_restore_through_an_s3_server(s3, tmp_path):
    # Flags for emberd (the secret from a file), the environment for ember below.
    node = Node(data_dir=str(tmp_path / "data"), extra_args=[
        "--archive", LOCATION, *FAST, "--archive-s3-endpoint", s3["url"], "--archive-s3-region", "us-east-1",
        "--archive-s3-access-key-id", s3["key"], "--archive-s3-secret-access-key-file", s3["secret_file"],
        "--archive-s3-part-size", "5MiB"])
    node.start()
    try:
        wait_for("first base", lambda: archive_status(node.url)["lastBase"])
        for i in range(20):
            requests.put(f"{node.url}/a/k{i}.json?ns=s3", data=json.dumps({"n": i}), timeout=5).raise_for_status()
        # A state over one part: the base written when the node archives again goes up in parts.
        big = "x" * (PART + (1 << 20))
        requests.put(f"{node.url}/big.json?ns=s3", data=json.dumps(big), timeout=60).raise_for_status()
        wait_archived(node.url)
        node.stop()
        assert node.proc.returncode == 0
        node.start()
        wait_for("the second base", lambda: len([k for k in keys(s3) if k.startswith("base-")]) == 2)
        for i in range(20):
            requests.patch(f"{node.url}/a.json?ns=s3", data=json.dumps({f"k{i}": {"m": i}}), timeout=5).raise_for_status()
        requests.delete(f"{node.url}/big.json?ns=s3", timeout=5).raise_for_status()
        wait_archived(node.url)
        a = archive_status(node.url)
        assert a["location"] == LOCATION and a["lastError"] is None and a["gaps"] == []
        live = requests.get(f"{node.url}/.json?ns=s3", timeout=10).json()
        live_hash = requests.get(f"{node.url}/.ember/status", timeout=5).json()["stateHash"]
    finally:
        node.stop()

    stored = keys(s3)
    bases = sorted(k for k in stored if k.startswith("base-"))
    # The second base went up as a multipart upload (its ETag counts the parts), none left open.
    assert stored[bases[1]]["Size"] > PART and stored[bases[1]]["ETag"].strip('"').endswith("-2"), stored[bases[1]]
    assert s3["client"].list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    assert all(k.startswith(("seg-", "base-")) for k in stored), stored.keys()

    listing = json.loads(ember_s3(s3, "archive", "ls", "--json", LOCATION).stdout)
    segs = listing["segments"]
    assert listing["gaps"] == [] and len(listing["bases"]) == 2 and len(segs) >= 2
    assert sorted(s["name"] for s in segs) == sorted(k for k in stored if k.startswith("seg-"))
    assert all(b["first"] == a["last"] + 1 for a, b in zip(segs, segs[1:]))
    v = json.loads(ember_s3(s3, "archive", "verify", "--json", LOCATION).stdout)
    assert v["ok"] and v["checked"] == len(segs) + 2, v

    # To the end (from the multipart base): the live state and hash.
    data = str(tmp_path / "restored-end")
    out = json.loads(ember_s3(s3, "restore", "--archive", LOCATION, "--to-index", str(segs[-1]["last"]),
                              "--data", data, "--json").stdout)
    assert out["base"] == bases[1] and out["hashVerified"] is True and out["stateHash"] == live_hash, out
    assert served(data, "s3") == live
    # To every segment end before the second base (from the first): the hash recorded there.
    for s in [s for s in segs if s["last"] < listing["bases"][1]["first"]]:
        data = str(tmp_path / f"restored-{s['last']}")
        out = json.loads(ember_s3(s3, "restore", "--archive", LOCATION, "--to-index", str(s["last"]),
                                  "--data", data, "--json").stdout)
        assert out["base"] == bases[0] and out["hashVerified"] is True and out["stateHash"] == s["stateHash"], out
        shutil.rmtree(data)

    # A segment altered in the store (a copy under another prefix).
    seg = next(k for k in sorted(keys(s3)) if k.startswith("seg-"))
    body = bytearray(s3["client"].get_object(Bucket=BUCKET, Key=f"{PREFIX}/{seg}")["Body"].read())
    body[len(body) // 2] ^= 0x10
    s3["client"].put_object(Bucket=BUCKET, Key=f"bad/{seg}", Body=bytes(body))
    v = ember_s3(s3, "archive", "verify", "--json", f"s3://{BUCKET}/bad", check=False)
    report = json.loads(v.stdout)
    assert v.returncode == 1 and len(report["problems"]) == 1 and seg in report["problems"][0], report


def test_a_wrong_key_or_none_is_a_clear_error(s3, tmp_path):
    p = ember_s3(s3, "archive", "ls", LOCATION, check=False, secret="not-the-secret")
    assert p.returncode == 1 and "SignatureDoesNotMatch" in p.stderr, p.stderr
    data = str(tmp_path / "r")
    p = ember_s3(s3, "restore", "--archive", LOCATION, "--to-index", "1", "--data", data, check=False, secret="not-the-secret")
    assert p.returncode == 1 and "403" in p.stderr and not os.path.exists(os.path.join(data, "data.mdb")), p.stderr
    p = subprocess.run([EMBER, "archive", "ls", LOCATION], capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")})
    assert p.returncode == 1 and "AWS_ACCESS_KEY_ID" in p.stderr, p.stderr
