"""The web console (/.ember/console/) in a real browser: Debian's headless Chromium driven by
selenium. A missing browser or driver fails these tests; nothing here passes without a browser.
Screenshots go to .build/console-artifacts/."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import EMBERD, ROOT, Node

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from local_cluster import SCRIPT  # noqa: E402

ARTIFACTS = os.path.join(ROOT, ".build", "console-artifacts")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
ADMIN = "owner"  # the admin token of the node's default (protected-mode) verifier


@pytest.fixture(scope="module")
def browser():
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing: scripts/bootstrap.sh installs chromium"
    assert os.access(CHROMEDRIVER, os.X_OK), f"{CHROMEDRIVER} is missing: scripts/bootstrap.sh installs chromium-driver"
    os.environ["SE_OFFLINE"] = "true"  # never let selenium look for drivers on the network
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    os.makedirs(ARTIFACTS, exist_ok=True)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def console_node():
    n = Node().start()
    yield n
    n.stop()


def shot(driver, name):
    driver.save_screenshot(os.path.join(ARTIFACTS, name + ".png"))


def wait(driver, timeout=10):
    return WebDriverWait(driver, timeout, poll_frequency=0.05)


def row(driver, path):
    return driver.find_element(By.CSS_SELECTOR, f'.entry[data-path="{path}"] > .row')


def action(driver, path, cls):
    """A row's action button, shown while the pointer is over the row (as a person uses it)."""
    r = row(driver, path)
    ActionChains(driver).move_to_element(r).perform()
    r.find_element(By.CLASS_NAME, cls).click()


def open_console(driver, node, ns, token=ADMIN, tab="data"):
    driver.get(f"{node.url}/.ember/console/#{tab}")
    driver.execute_script("sessionStorage.clear()")
    driver.find_element(By.ID, "ns").clear()
    driver.find_element(By.ID, "ns").send_keys(ns)
    driver.find_element(By.ID, "token").clear()
    if token:
        driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "signin-button").click()


def expand(driver, path):
    wait(driver).until(EC.presence_of_element_located((By.CSS_SELECTOR, f'.entry[data-path="{path}"] > .row')))
    row(driver, path).find_element(By.CLASS_NAME, "toggle").click()
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, f'.entry[data-path="{path}"] > .node > .entry'))


def rest(node, ns, path, method="GET", body=None):
    r = requests.request(method, f"{node.url}{path}.json?ns={ns}", data=None if body is None else json.dumps(body),
                         headers={"Authorization": "Bearer " + ADMIN}, timeout=10)
    r.raise_for_status()
    return r.json()


def test_console_is_served_with_security_headers(console_node):
    r = requests.get(console_node.url + "/.ember/console/", timeout=5)
    assert r.status_code == 200 and "text/html" in r.headers["Content-Type"]
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script>" not in r.text and " style=" not in r.text  # no inline script or style
    assert requests.get(console_node.url + "/.ember/console/main.js", timeout=5).headers["Content-Type"].startswith("text/javascript")
    assert requests.get(console_node.url + "/.ember/console/nope.js", timeout=5).status_code == 404


def test_console_can_be_turned_off():
    n = Node(extra_args=["--no-console"]).start()
    try:
        r = requests.get(n.url + "/.ember/console/", timeout=5)
        assert r.status_code == 404 and "turned off" in r.json()["error"]
    finally:
        n.stop()


def test_data_viewer_shows_edits_and_follows_live_changes(browser, console_node):
    ns = "c" + uuid.uuid4().hex[:10]
    rest(console_node, ns, "/users", "PUT", {"alice": {"age": 30, "name": "Alice"}, "bob": {"age": 25}})
    open_console(browser, console_node, ns)
    expand(browser, "/users")
    expand(browser, "/users/alice")
    age = row(browser, "/users/alice/age")
    wait(browser).until(lambda d: row(d, "/users/alice/age").find_element(By.CLASS_NAME, "value").text == "30")
    shot(browser, "data-seeded")

    # Inline edit of a value with its type, read back over REST.
    age.find_element(By.CLASS_NAME, "value").click()
    form = browser.find_element(By.CSS_SELECTOR, ".editrow")
    field = form.find_element(By.CLASS_NAME, "edit-value")
    field.clear()
    field.send_keys("31")
    form.find_element(By.CSS_SELECTOR, "select.type option[value=number]").click()
    form.find_element(By.CLASS_NAME, "save").click()
    wait(browser).until(lambda d: rest(console_node, ns, "/users/alice/age") == 31)
    wait(browser).until(lambda d: row(d, "/users/alice/age").find_element(By.CLASS_NAME, "value").text == "31")

    # A write over REST shows up in the page within a second (live stream), flashed as added.
    wait(browser).until(lambda d: "live: on" in d.find_element(By.ID, "data-live").text)
    rest(console_node, ns, "/users/carol", "PUT", {"age": 7})
    started = time.time()
    WebDriverWait(browser, 1.0, poll_frequency=0.02).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, '.entry[data-path="/users/carol"]')))
    assert time.time() - started < 1.0
    assert "flash-add" in row(browser, "/users/carol").get_attribute("class")
    rest(console_node, ns, "/users/bob/age", "PUT", 26)
    expand(browser, "/users/bob")
    wait(browser).until(lambda d: row(d, "/users/bob/age").find_element(By.CLASS_NAME, "value").text == "26")
    shot(browser, "data-live")

    # Add a child through the page.
    action(browser, "/users", "add")
    form = browser.find_element(By.CSS_SELECTOR, ".editrow")
    form.find_element(By.CLASS_NAME, "child-key").send_keys("dave")
    form.find_element(By.CLASS_NAME, "child-value").send_keys("hello")
    form.find_element(By.CLASS_NAME, "save").click()
    try:
        wait(browser).until(lambda d: rest(console_node, ns, "/users/dave") == "hello")
    finally:
        shot(browser, "data-add-child")

    # Delete through the page (behind a confirm).
    action(browser, "/users/bob", "delete")
    wait(browser).until(EC.alert_is_present()).accept()
    wait(browser).until(lambda d: rest(console_node, ns, "/users/bob") is None)
    wait(browser).until(lambda d: not d.find_elements(By.CSS_SELECTOR, '.entry[data-path="/users/bob"]'))
    # A removal over REST disappears from the page too.
    rest(console_node, ns, "/users/carol", "DELETE")
    wait(browser, 2).until(lambda d: not d.find_elements(By.CSS_SELECTOR, '.entry[data-path="/users/carol"]'))
    shot(browser, "data-after-delete")


def test_query_panel_shows_results_and_server_errors(browser, console_node):
    ns = "c" + uuid.uuid4().hex[:10]
    rest(console_node, ns, "/scores", "PUT", {"a": 5, "b": 1, "c": 9})
    open_console(browser, console_node, ns, tab="query")
    browser.find_element(By.ID, "q-path").clear()
    browser.find_element(By.ID, "q-path").send_keys("/scores")
    browser.find_element(By.CSS_SELECTOR, "#q-order option[value='$value']").click()
    browser.find_element(By.ID, "q-last").send_keys("2")
    browser.find_element(By.ID, "q-run").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "q-result").text.strip().startswith("{"))
    assert json.loads(browser.find_element(By.ID, "q-result").text) == {"a": 5, "c": 9}
    # No index on a child: the server's own error, as it is.
    browser.find_element(By.CSS_SELECTOR, "#q-order option[value='child']").click()
    browser.find_element(By.ID, "q-child").send_keys("height")
    browser.find_element(By.ID, "q-path").clear()
    browser.find_element(By.ID, "q-path").send_keys("/nowhere")
    browser.find_element(By.ID, "q-run").click()
    wait(browser).until(lambda d: "Index not defined" in d.find_element(By.ID, "q-result").text)
    shot(browser, "query-error")


def test_rules_parse_error_is_shown_at_its_line_and_playground_decides(browser, console_node):
    ns = "c" + uuid.uuid4().hex[:10]
    rest(console_node, ns, "/users/alice", "PUT", {"age": 30})
    open_console(browser, console_node, ns, tab="rules")
    wait(browser).until(lambda d: d.find_element(By.ID, "rules-status").text == "loaded")
    text = browser.find_element(By.ID, "rules-text")
    text.clear()
    text.send_keys('{"rules": {\n  ".read": true,\n  ".write": "auth.uid ==="\n}}')
    browser.find_element(By.ID, "rules-save").click()
    wait(browser).until(lambda d: "Rules refused: line 3" in d.find_element(By.ID, "rules-status").text)
    assert browser.find_element(By.CSS_SELECTOR, "#rules-lines .bad").text.strip() == "3"
    shot(browser, "rules-error")

    good = '{"rules": {"users": {"$uid": {".read": "auth != null && auth.uid === $uid", ".write": "auth.uid === $uid"}}}}'
    browser.execute_script("document.getElementById('rules-text').value = arguments[0]", good)
    browser.find_element(By.ID, "rules-save").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "rules-status").text == "published")
    assert "auth.uid === $uid" in requests.get(f"{console_node.url}/.settings/rules.json?ns={ns}",
                                               headers={"Authorization": "Bearer owner"}, timeout=5).text

    def simulate(kind, path, auth, data="null"):
        browser.find_element(By.CSS_SELECTOR, f"#play-type option[value='{kind}']").click()
        for fid, value in (("play-path", path), ("play-auth", auth), ("play-data", data)):
            browser.execute_script("document.getElementById(arguments[0]).value = arguments[1]", fid, value)
        before = browser.find_element(By.ID, "play-verdict").text
        browser.find_element(By.ID, "play-run").click()
        wait(browser).until(lambda d: d.find_element(By.ID, "play-verdict").text not in ("", before))
        return browser.find_element(By.ID, "play-verdict")

    v = simulate("read", "/users/alice", '{"uid": "alice"}')
    assert v.text.startswith("Allowed") and "/users/$uid" in v.text and "allowed" in v.get_attribute("class")
    v = simulate("set", "/users/alice/age", '{"uid": "bob"}', "5")
    assert v.text.startswith("Denied") and "denied" in v.get_attribute("class")
    shot(browser, "rules-playground")
    # The playground wrote nothing.
    assert rest(console_node, ns, "/users/alice") == {"age": 30}


def test_a_level_with_100000_children_opens_in_under_2_seconds(browser, console_node):
    ns = "c" + uuid.uuid4().hex[:10]
    r = requests.put(f"{console_node.url}/big.json?ns={ns}&print=silent", data=json.dumps({f"k{i:06d}": i for i in range(100_000)}),
                     headers={"Authorization": "Bearer " + ADMIN}, timeout=120)
    assert r.status_code == 204
    open_console(browser, console_node, ns, tab="rules")  # signed in, no data stream open
    started = time.time()
    browser.get(f"{console_node.url}/.ember/console/#data:/big")
    try:
        wait(browser, 5).until(lambda d: d.find_element(By.ID, "tree").get_attribute("data-ready") == "true"
                               and d.find_elements(By.CSS_SELECTOR, '.entry[data-path="/big/k000099"]'))
        elapsed = time.time() - started
    finally:
        shot(browser, "data-100k")
    assert elapsed < 2.0, f"opening a level of 100,000 children took {elapsed:.2f} s"
    # One page drawn, the rest on demand.
    assert len(browser.find_elements(By.CSS_SELECTOR, '.entry[data-path="/big"] > .node > .entry')) == 100
    more = browser.find_element(By.CSS_SELECTOR, ".show-more")
    assert "100 shown" in more.text
    more.click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, '.entry[data-path="/big"] > .node > .entry')) == 200)
    assert browser.find_elements(By.CSS_SELECTOR, '.entry[data-path="/big/k000199"]')

    # Each drawn child is told from a leaf by reading at most one of its keys, never a listing
    # of all of them (a child with 100,000 children kept a debug node busy for seconds).
    reads = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    shallow = [u for u in reads if "shallow=true" in u]
    assert shallow and all("limitToFirst=" in u for u in shallow), shallow


def test_shallow_key_pages_over_rest(console_node):
    """The console's paging: shallow=true&orderBy="$key"&startAfter=K&limitToFirst=N (an Ember
    extension; Firebase refuses query parameters other than limitToFirst with shallow)."""
    ns = "c" + uuid.uuid4().hex[:10]
    keys = ["-1", "0", "7", "12", "a", "b b", "z"]
    rest(console_node, ns, "/p", "PUT", {k: {"v": i} for i, k in enumerate(keys)})

    def page(after, n):
        r = requests.get(f"{console_node.url}/p.json", params={"ns": ns, "shallow": "true", "orderBy": '"$key"',
                                                              "startAfter": json.dumps(after), "limitToFirst": n}, timeout=5)
        assert r.status_code == 200, r.text
        return list(r.json().keys())
    got, after = [], None
    first = requests.get(f"{console_node.url}/p.json", params={"ns": ns, "shallow": "true", "limitToFirst": 3}, timeout=5).json()
    assert set(first) == {"-1", "0", "7"}  # integer keys first, numerically
    assert sorted(page("7", 10), key=keys.index) == ["12", "a", "b b", "z"]
    assert page("z", 10) == []
    bad = requests.get(f"{console_node.url}/p.json", params={"ns": ns, "shallow": "true", "orderBy": '"$key"', "startAfter": "3"}, timeout=5)
    assert bad.status_code == 400 and "startAfter" in bad.json()["error"]
    bad = requests.get(f"{console_node.url}/p.json", params={"ns": ns, "shallow": "true", "orderBy": '"$value"', "startAfter": '"a"'}, timeout=5)
    assert bad.status_code == 400


def test_cluster_dashboard_shows_three_members_and_one_leader(browser):
    d = tempfile.mkdtemp(prefix="ember-console-cluster-")
    env = {**os.environ, "EMBERD": EMBERD}
    subprocess.run([sys.executable, SCRIPT, "up", "--nodes", "3", "--dir", d], check=True, env=env, capture_output=True)
    try:
        with open(os.path.join(d, "cluster.json")) as f:
            nodes = json.load(f)["nodes"]
        browser.get(nodes[0]["url"] + "/.ember/console/#cluster")
        browser.execute_script("sessionStorage.setItem('ember.token', 'owner')")
        browser.refresh()

        def three_with_one_leader(drv):
            rows = drv.find_elements(By.CSS_SELECTOR, "#cluster-members tbody tr")
            roles = [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows]
            return len(rows) == 3 and roles.count("leader") == 1 and roles.count("follower") == 2
        wait(browser, 15).until(three_with_one_leader)
        assert len(browser.find_elements(By.CSS_SELECTOR, "#cluster-members tr.leader")) == 1
        assert {r.get_attribute("data-member") for r in browser.find_elements(By.CSS_SELECTOR, "#cluster-members tbody tr")} == {"n1", "n2", "n3"}
        # Each member's data file and free pages (what a defrag gives back), from its status.
        for row in browser.find_elements(By.CSS_SELECTOR, "#cluster-members tbody tr"):
            member = next(n for n in nodes if n["id"] == row.get_attribute("data-member"))
            st = requests.get(member["url"] + "/.ember/status", headers={"Authorization": "Bearer owner"}, timeout=5).json()["storage"]
            disk = row.find_element(By.CSS_SELECTOR, "td.disk")
            assert re.fullmatch(r"\d+\.\d MiB, \d+ % free", disk.text), disk.text
            assert disk.text.startswith(f"{st['fileBytes'] / 1048576:.1f} MiB"), (disk.text, st)
            assert f"data file {st['fileBytes']} bytes" in disk.get_attribute("title")
        time.sleep(2.2)  # two metric polls: the charts have points
        shot(browser, "cluster-dashboard")
        assert browser.find_element(By.CSS_SELECTOR, "#chart-writes polyline").get_attribute("points")
    finally:
        subprocess.run([sys.executable, SCRIPT, "down", "--dir", d], env=env, capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def test_cluster_panel_marks_learners_and_shows_their_state_hashes(browser):
    """3 voters + a learner: the learner is a row of its own marked as one, and the corruption
    check's verdict (the button runs it) lists its hash apart from the voters', not counted."""
    d = tempfile.mkdtemp(prefix="ember-console-learner-")
    env = {**os.environ, "EMBERD": EMBERD}
    subprocess.run([sys.executable, SCRIPT, "up", "--nodes", "3", "--dir", d], check=True, env=env, capture_output=True)
    try:
        out = subprocess.run([sys.executable, SCRIPT, "add-node", "--dir", d, "--id", "n4", "--register", "--learner"],
                             check=True, env=env, capture_output=True, text=True)
        n4 = json.loads(out.stdout.strip().splitlines()[-1])
        with open(os.path.join(d, "cluster.json")) as f:
            nodes = json.load(f)["nodes"]
        owner = {"Authorization": "Bearer owner"}
        requests.put(nodes[0]["url"] + "/checked.json", data='"a value"', headers=owner, timeout=10).raise_for_status()
        browser.get(nodes[0]["url"] + "/.ember/console/#cluster")
        browser.execute_script("sessionStorage.setItem('ember.token', 'owner')")
        browser.refresh()

        # Read in one script: the panel re-renders its rows every second (no stale elements).
        def four_with_a_learner(drv):
            return [tuple(r) for r in drv.execute_script(
                "return [...document.querySelectorAll('#cluster-members tbody tr')].map((r) => "
                "[r.dataset.member, r.cells[1].textContent, r.classList.contains('learner')])")]
        wait(browser, 20).until(lambda drv: ("n4", "learner", True) in four_with_a_learner(drv)
                                and len(four_with_a_learner(drv)) == 4)
        rows = four_with_a_learner(browser)
        assert [m for m, _, learner in rows if learner] == ["n4"], rows
        assert sorted(role for m, role, _ in rows if m != "n4") == ["follower", "follower", "leader"], rows
        assert "3 voters + 1 learner" in browser.find_element(By.ID, "cluster-summary").text
        # The learner has Promote, not Make leader.
        buttons = browser.execute_script(
            "return [...document.querySelectorAll('#cluster-members tr[data-member=\"n4\"] button')].map((b) => b.className)")
        assert "promote" in buttons and "transfer" not in buttons, buttons

        # Every member applied everything (an idle cluster): the check meets at one index.
        def applied():
            seen = {requests.get(n["url"] + "/.ember/status", headers=owner, timeout=5).json()["appliedIndex"] for n in nodes}
            return len(seen) == 1
        deadline = time.time() + 20
        while not applied():
            assert time.time() < deadline, "the members did not reach one applied index"
            time.sleep(0.1)
        browser.find_element(By.ID, "cluster-check-run").click()

        def hash_rows(drv):
            return {r[0]: r[1:] for r in drv.execute_script(
                "return [...document.querySelectorAll('#cluster-hashes tbody tr')].map((r) => "
                "[r.dataset.member, ...[...r.cells].map((c) => c.textContent), r.classList.contains('learner')])")}
        wait(browser, 30).until(lambda drv: "applied index" in drv.find_element(By.ID, "cluster-check-summary").text
                                and "n4" in hash_rows(drv) and hash_rows(drv)["n4"][2])
        shot(browser, "cluster-learner-hashes")
        table = hash_rows(browser)
        summary = browser.find_element(By.ID, "cluster-check-summary").text
        index = int(re.search(r"applied index (\d+)", summary).group(1))
        assert "a majority of the voters agree" in summary, summary
        assert set(table) == {"n1", "n2", "n3", "n4"}, table
        assert table["n4"][1:2] == ["learner (not counted)"] and table["n4"][4] is True, table
        assert all(table[m][1] == "voter" and table[m][4] is False for m in ("n1", "n2", "n3")), table
        # The hashes shown are the members' own at that index: the learner's is the one its
        # status reports (nothing was written since), equal to the voters'.
        st4 = requests.get(n4["url"] + "/.ember/status", headers=owner, timeout=5).json()
        assert st4["appliedIndex"] == index, (st4["appliedIndex"], index)
        assert table["n4"][2] == st4["stateHash"] and table["n4"][3] == "agrees", table
        assert {table[m][2] for m in table} == {st4["stateHash"]}, table
        # The node's status carries the same verdict (lastHashCheck), learnerHashes included,
        # and the table follows it on the next polls.
        last = requests.get(nodes[0]["url"] + "/.ember/status", headers=owner, timeout=5).json()["lastHashCheck"]
        assert last["learnerHashes"] == {"n4": st4["stateHash"]} and "n4" not in last["hashes"], last
        assert sorted(last["voters"]) == ["n1", "n2", "n3"]
    finally:
        subprocess.run([sys.executable, SCRIPT, "down", "--dir", d], env=env, capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def test_rules_simulate_endpoint_limits_and_errors(console_node):
    url = console_node.url + "/.ember/rules/simulate"
    admin = {"Authorization": "Bearer " + ADMIN}
    body = {"type": "read", "path": "/x", "auth": None, "rules": '{"rules": {".read": "auth != null"}}'}
    assert requests.post(url, json=body, timeout=5).status_code == 401  # admin only
    r = requests.post(url, json=body, headers=admin, timeout=5)
    assert r.status_code == 200 and r.json()["allowed"] is False and r.json()["decidedBy"] is None
    r = requests.post(url, json={**body, "auth": {"uid": "u"}}, headers=admin, timeout=5)
    assert r.json()["allowed"] is True and r.json()["decidedBy"]["rule"] == "auth != null"
    for bad, fragment in ((b"{not json", "JSON"), (json.dumps({**body, "type": "nuke"}).encode(), "type"),
                          (json.dumps({**body, "path": "/a/.b"}).encode(), ""),
                          (json.dumps({**body, "rules": '{"rules": {".read": "nope ==="}}'}).encode(), "line 1")):
        r = requests.post(url, data=bad, headers=admin, timeout=5)
        assert r.status_code == 400 and fragment in r.json()["error"], r.text
    r = requests.post(url, data=b"x" * (2 * 1024 * 1024), headers=admin, timeout=10)
    assert r.status_code == 413
    assert requests.get(url, headers=admin, timeout=5).status_code == 405


def test_push_import_and_export_through_the_page(browser, console_node, tmp_path):
    ns = "c" + uuid.uuid4().hex[:10]
    rest(console_node, ns, "/inbox/seed", "PUT", True)
    open_console(browser, console_node, ns)
    expand(browser, "/inbox")
    action(browser, "/inbox", "push")
    form = browser.find_element(By.CSS_SELECTOR, ".editrow")
    form.find_element(By.CLASS_NAME, "child-value").send_keys("42")
    form.find_element(By.CSS_SELECTOR, "select.type option[value=number]").click()
    form.find_element(By.CLASS_NAME, "save").click()
    wait(browser).until(lambda d: len(rest(console_node, ns, "/inbox")) == 2)
    pushed = [k for k in rest(console_node, ns, "/inbox") if k != "seed"][0]
    assert len(pushed) == 20 and rest(console_node, ns, f"/inbox/{pushed}") == 42  # a push id
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, f'.entry[data-path="/inbox/{pushed}"]')))

    # Import a JSON file at the viewed path (behind a confirm), then export it back.
    doc = {"imported": {"a": 1, "b": [1, 2, 3]}, "x": "y"}
    f = tmp_path / "import.json"
    f.write_text(json.dumps(doc))
    root = browser.find_element(By.ID, "data-root")
    root.clear()
    root.send_keys("/restored")
    browser.find_element(By.ID, "data-go").click()
    browser.find_element(By.ID, "data-import").send_keys(str(f))
    wait(browser).until(EC.alert_is_present()).accept()
    wait(browser).until(lambda d: rest(console_node, ns, "/restored") == doc)
    browser.find_element(By.ID, "data-export").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "data-status").text.startswith("exported /restored"))
    shot(browser, "data-import-export")


def test_without_the_admin_token_the_page_shows_what_the_rules_allow(browser, console_node):
    ns = "c" + uuid.uuid4().hex[:10]
    rest(console_node, ns, "/", "PUT", {"public": {"motd": "hi"}, "secret": {"k": 1}})
    r = requests.put(f"{console_node.url}/.settings/rules.json?ns={ns}", headers={"Authorization": "Bearer " + ADMIN}, timeout=5,
                     data=json.dumps({"rules": {"public": {".read": True}}}))
    assert r.status_code == 200, r.text
    open_console(browser, console_node, ns, token=None)
    wait(browser).until(lambda d: "Permission denied" in d.find_element(By.ID, "data-status").text)
    assert browser.find_element(By.ID, "identity").text == "anonymous"
    browser.get(f"{console_node.url}/.ember/console/#data:/public")
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, '.entry[data-path="/public/motd"]'))
    wait(browser).until(lambda d: row(d, "/public/motd").find_element(By.CLASS_NAME, "value").text == "hi")
    assert not browser.find_elements(By.CSS_SELECTOR, '.entry[data-path="/secret"]')
    # The rules tab needs the admin.
    browser.get(f"{console_node.url}/.ember/console/#rules")
    wait(browser).until(lambda d: "401" in d.find_element(By.ID, "rules-status").text)
    shot(browser, "anonymous")


def test_cluster_panel_shows_the_point_in_time_archive(browser, tmp_path):
    archive = str(tmp_path / "archive")
    n = Node(extra_args=["--archive", archive, "--archive-segment-age", "0.2s"]).start()
    try:
        requests.put(n.url + "/a.json", data="1", timeout=5).raise_for_status()
        browser.get(n.url + "/.ember/console/#cluster")
        browser.execute_script("sessionStorage.setItem('ember.token', 'owner')")
        browser.refresh()
        st = None

        def shows_archive(drv):
            nonlocal st
            st = requests.get(n.url + "/.ember/status", timeout=5).json()["archive"]
            text = drv.find_element(By.ID, "cluster-archive").text
            return st["lastSegment"] and text.startswith(f"archive {archive}: through index {st['archivedThrough']}") and f"window from {st['windowStart']}" in text
        wait(browser, 15).until(shows_archive)
    finally:
        n.stop()


def test_cluster_panel_shows_a_member_catching_up(browser, tmp_path):
    """A follower restarted wiped while the other two are paused (SIGSTOP) has not caught up: its
    own console's cluster panel says so in its role cell, with the reads it holds, and shows the
    paused members unreachable instead of waiting for them; once they resume the mark goes."""
    from cluster_helpers import Cluster
    from test_catch_up import Paused, restart_behind
    c = Cluster(tmp_path / "c")
    try:
        victim, others, _ = restart_behind(c, "cc" + uuid.uuid4().hex[:8], wipe=True)
        with Paused(c, others):
            subprocess.run([sys.executable, SCRIPT, "start-node", "--dir", c.dir, "--id", victim], check=True,
                           env={**os.environ, "EMBERD": EMBERD}, capture_output=True)
            browser.get(c.url(victim) + "/.ember/console/#cluster")
            browser.execute_script("sessionStorage.setItem('ember.token', 'owner')")
            browser.refresh()

            # The table is rebuilt on every poll: read it in one script, not element by element.
            rows_js = ("return [...document.querySelectorAll('#cluster-members tbody tr')].map(r => "
                       "[r.dataset.member, r.children[1].textContent, r.children[1].className])")

            def marked(drv):
                rows = {m: (text, cls) for m, text, cls in drv.execute_script(rows_js)}
                text, cls = rows.get(victim, ("", ""))
                # The paused members are shown unreachable (their status is not waited for).
                return cls == "catching-up" and all(rows.get(o, ("",))[0] == "unreachable" for o in others) and text
            text = wait(browser, 20).until(marked)
            assert ", catching up (" in text and text.endswith(" reads held)"), text
            shot(browser, "cluster-catching-up")

        def caught_up(drv):
            rows = {m: (text, cls) for m, text, cls in drv.execute_script(rows_js)}
            return rows.get(victim) == ("follower", "")
        wait(browser, 30).until(caught_up)
    finally:
        c.down()


def test_triggers_panel_shows_state_and_pauses_resumes_replays(browser, console_node):
    from test_triggers import Receiver, SECRET, put_triggers
    receiver = Receiver()
    try:
        ns = "tp" + uuid.uuid4().hex[:8]
        receiver.status = 500
        assert put_triggers(console_node, ns, {"hook": {"path": "/m/{id}", "on": ["created"], "url": receiver.url, "secret": SECRET,
                                                        "retries": 0}}).status_code == 200
        rest(console_node, ns, "/m/a", "PUT", 1)
        open_console(browser, console_node, ns, tab="triggers")
        sel = '#triggers-table tr[data-trigger="hook"]'
        # The panel redraws its table every second: read cells by selector each time, and click
        # again when the button was redrawn under the click.
        text = lambda d, cell: d.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", sel + " " + cell)

        def click(cls):
            from selenium.common.exceptions import StaleElementReferenceException
            for _ in range(20):
                try:
                    browser.find_element(By.CSS_SELECTOR, sel + " button." + cls).click()
                    return
                except StaleElementReferenceException:
                    continue
            raise AssertionError(f"could not click {cls}")
        wait(browser, 20).until(lambda d: text(d, "td.dead") == "1")
        assert "HTTP 500" in text(browser, "td.error")
        assert "✗" in text(browser, "td.recent")
        state = lambda: requests.get(f"{console_node.url}/.ember/triggers?ns={ns}", headers={"Authorization": "Bearer " + ADMIN}, timeout=5).json()["triggers"]["hook"]["state"]
        click("pause")
        wait(browser).until(lambda d: text(d, "td.state") == "paused")
        assert state()["paused"] is True
        click("resume")
        wait(browser).until(lambda d: text(d, "td.state") == "active")
        receiver.status = 200
        click("show-dead")
        wait(browser).until(lambda d: '"/m/a"' in d.find_element(By.ID, "triggers-dead").text)
        click("replay")
        browser.switch_to.alert.accept()
        wait(browser, 20).until(lambda d: text(d, "td.dead") == "0")
        assert [e["ref"] for e in receiver.wait(1)] == ["/m/a"]
        shot(browser, "triggers-panel")
    finally:
        receiver.close()
