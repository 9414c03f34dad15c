"""The memory inspector at /ui/, in a real Chromium against a real `memoryd serve`: sign in, see
a conversation, correct it (undo a supersession, complete a task, edit and delete a memory,
forget the user), explain a query; a wrong token, a frame, a daemon recovering or down; and no
stored text is ever run as HTML. Screenshots of each view go to build/ui-screenshots/."""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.keys import Keys

from memoryd.ui import STATIC_DIR
from support.browser import PHONE, Browser
from support.config import MODEL_DIR
from support.server import ServerProcess

# Stored text that would run if the page ever parsed it as HTML.
XSS = [
    "<script>window.__xss = 'script'</script> keep this note",
    "<img src=x onerror=\"window.__xss = 'img'\"> is my avatar",
    "I live in <svg onload=\"window.__xss = 'svg'\">",
]


def _ts(days_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago)).isoformat()


CONVERSATION = [
    ("s1", 3.0, "I live in Lisbon."),
    ("s1", 2.99, "Yesterday I went kayaking on the Douro with Marta."),
    ("s1", 2.98, "Remind me to renew my passport next month."),
    ("s2", 1.0, "I moved to Porto last week."),
    ("s2", 0.99, "If it rains, take the bus to work."),
    *(("s2", 0.98 - i / 100, text) for i, text in enumerate(XSS)),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("ui") / "data", MODEL_DIR)
    yield proc
    proc.stop()


@pytest.fixture
def browser(server: ServerProcess, tmp_path: Path) -> Iterator[Browser]:
    window = Browser(server.url, downloads=tmp_path / "downloads")
    yield window
    window.close()


def ingest(server: ServerProcess, user: str) -> dict[str, Any]:
    turns = [
        {"session_id": s, "role": "user", "text": text, "ts": _ts(days)}
        for s, days, text in CONVERSATION
    ]
    with server.client() as client:
        reply = client.post(f"/v1/users/{user}/turns", json={"turns": turns})
    reply.raise_for_status()
    return dict(reply.json())


def problems_in(log: list[dict[str, Any]]) -> list[str]:
    """Console errors the page caused (a refused script, a CSP violation, an exception), but
    the failed requests a test provokes on purpose (4xx replies, a stopped daemon)."""
    expected = re.compile(r"status of 40[14]|status of 409|ERR_CONNECTION_REFUSED|Failed to fetch")
    return [
        e["message"] for e in log if e["level"] == "SEVERE" and not expected.search(e["message"])
    ]


def nothing_ran(browser: Browser) -> None:
    """No stored string became an element or ran: no flag set, no img or script in the page."""
    assert browser.driver.execute_script("return window.__xss") is None
    assert browser.find_all("main img, main script, main iframe") == []


# -- the files and the headers ---------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_the_page_is_served_whole_from_the_package_with_a_strict_policy(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.url) as client:
        page = client.get("/ui/")
        root = client.get("/")
        files = {
            p.name: client.get(f"/ui/{p.relative_to(STATIC_DIR)}") for p in STATIC_DIR.rglob("*.*")
        }
        unauthorised = client.get("/v1/users")
        docs = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    for directive in ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"):
        assert directive in policy
    assert "unsafe" not in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert root.status_code == 307 and root.headers["location"] == "/ui/"
    assert all(reply.status_code == 200 for reply in files.values()), files
    assert files["app.js"].headers["content-type"].startswith("text/javascript")
    # The API still wants its token; FastAPI's doc pages (CDN scripts) are not served.
    assert unauthorised.status_code == 401
    assert unauthorised.headers["content-security-policy"] == policy
    assert docs.status_code == 404

    tags = _Tags()
    tags.feed(page.text)
    for tag, attrs in tags.tags:
        assert not any(name.startswith("on") or name == "style" for name in attrs), (tag, attrs)
        if tag == "script":
            assert attrs.get("src") and attrs.get("type") == "module", attrs
        for name in ("src", "href"):
            assert "//" not in (attrs.get(name) or ""), (tag, attrs)  # nothing from elsewhere
    scripts = [p for p in STATIC_DIR.rglob("*.js")]
    sinks = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|Function\(")
    assert [p.name for p in scripts if sinks.search(p.read_text())] == []
    assert [
        p.name for p in scripts if re.search(r"https?://(?!www\.w3\.org/2000/svg)", p.read_text())
    ] == []


# -- in the browser ----------------------------------------------------------------------------


def test_a_wrong_token_is_refused(server: ServerProcess, browser: Browser) -> None:
    ingest(server, "secret-user")
    browser.open()
    browser.find("#token").send_keys("not-the-token")
    browser.click("form.sign-in button")
    refused = browser.find("main .error", "refused the token")
    assert "invalid bearer token" in refused.text
    assert "secret-user" not in browser.main_text()
    assert browser.driver.execute_script("return sessionStorage.length") == 0
    browser.screenshot("sign-in-refused")
    # The token is sent as a header only: never in the address, never in a cookie.
    browser.find("#token").send_keys(server.token)
    browser.click("form.sign-in button")
    browser.find("main a", "secret-user")
    assert server.token not in browser.driver.current_url
    assert browser.driver.get_cookies() == []


def test_see_and_correct_what_is_remembered(
    server: ServerProcess, browser: Browser, tmp_path: Path
) -> None:
    user = "ana"
    receipts = ingest(server, user)["turns"]
    kayak_turn = receipts[1]["turn_id"]
    episode = next(m["id"] for m in receipts[1]["memories"] if m["type"] == "episodic")
    browser.sign_in(server.token)

    row = browser.find("table.users tr", user)
    browser.wait(lambda _: "…" not in row.text)
    assert row.text.split()[:2] == [user, str(len(CONVERSATION))]
    browser.screenshot("users")

    browser.go(f"u/{user}/timeline")
    turn = browser.find(f"#turn-{kayak_turn}")
    assert "Douro" in turn.text and "episodic" in turn.text and "classifier" in turn.text
    turn.find_element("css selector", "button[aria-expanded]").click()
    browser.find(f"#turn-{kayak_turn} a", episode)
    assert browser.main_text().count(XSS[0]) == 1  # shown as the text it is
    nothing_ran(browser)
    browser.screenshot("timeline")

    # Undo the supersession: Lisbon is current again.
    browser.go(f"u/{user}/facts")
    lisbon = browser.find(".fact.superseded", "Lisbon")
    assert "replaced by" in lisbon.text and "Porto" in lisbon.text
    browser.screenshot("facts")
    lisbon.find_element("css selector", "button[data-fact]").click()
    browser.find("main .notice", "is current again")
    with server.client() as client:
        facts = client.get(f"/v1/users/{user}/facts").json()["facts"]
    assert any("Lisbon" in f["text"] and f["current"] for f in facts)

    # Complete the task.
    browser.go(f"u/{user}/tasks")
    task = browser.find(".task", "passport")
    browser.screenshot("tasks")
    task.find_element("css selector", 'button[data-move="done"]').click()
    browser.find("main .notice", "is now done")
    with server.client() as client:
        tasks = client.get(f"/v1/users/{user}/tasks", params={"status": "done"}).json()["tasks"]
    assert ["passport" in t["text"] for t in tasks] == [True]

    # Rules as trees, with feedback; episodes with their entities.
    browser.go(f"u/{user}/rules")
    rule = browser.find(".rule", "take the bus")
    assert "if it rains" in rule.text
    rule.find_element("css selector", 'button[data-vote="positive"]').click()
    browser.wait(lambda _: "helpful 1" in rule.text)
    nothing_ran(browser)
    browser.screenshot("rules")
    browser.go(f"u/{user}/episodes")
    assert "Marta" in browser.find(f'.episode[data-id="{episode}"]').text
    browser.screenshot("episodes")

    # Edit one memory, then delete it.
    browser.go(f"u/{user}/m/{episode}")
    text = browser.find("#memory-text")
    text.clear()
    text.send_keys("I went kayaking on the Douro with Marta and Rui.")
    browser.click("form.edit button[type=submit]")
    browser.find("main .notice", "Saved")
    with server.client() as client:
        assert client.get(f"/v1/users/{user}/memories/{episode}").json()["text"].endswith("Rui.")
    browser.screenshot("memory")
    browser.click("main button", "Delete…")
    browser.click("main button", "Delete for good")
    browser.find("main .notice", "Deleted")
    assert "/episodes" in browser.driver.current_url
    with server.client() as client:
        assert client.get(f"/v1/users/{user}/memories/{episode}").status_code == 404

    # Explain a query: sections, the context, why each item, the tier stages.
    browser.go(f"u/{user}/explain")
    browser.find("#query").send_keys("where do I live?")
    browser.click("main form button[type=submit]")
    context = browser.find("pre.context")
    assert "Lisbon" in context.text
    browser.find(".section.semantic .item", "Lisbon")
    assert browser.find("main table", "search hit")
    assert browser.find("main table", "tier 1")
    nothing_ran(browser)
    browser.screenshot("explain")

    browser.go(f"u/{user}/tiers")
    assert "lives in" in browser.find("main .card").text
    browser.screenshot("tiers")
    with server.client(timeout=300) as client:  # a training round, for the chart to show
        client.post(f"/v1/users/{user}/router/rounds").raise_for_status()
    browser.go(f"u/{user}/router")
    assert browser.find("main table", "macro-F1 after")
    assert len(browser.find_all("svg.chart circle")) == 1  # the round's macro-F1
    browser.screenshot("router")

    # Keep a copy: the export the page saves is the API's, record for record.
    browser.go(f"u/{user}")
    browser.click("main button", "Download the export")
    browser.find("main .meta", f"Saved {user}.jsonl")
    saved = tmp_path / "downloads" / f"{user}.jsonl"
    browser.wait(lambda _: saved.exists() and saved.read_text().endswith("\n"))
    with server.client() as client:
        exported = client.get(f"/v1/users/{user}/export").text.splitlines()
    downloaded = saved.read_text().splitlines()
    assert json.loads(downloaded[0])["user_id"] == user
    assert downloaded[1:-1] == exported[1:-1] and len(exported) > len(CONVERSATION)

    # Forget the user: the dialog names what goes; the receipt says what went.
    browser.click("main button", f"Forget {user}")
    dialog = browser.find("dialog")
    assert f"{len(CONVERSATION)} turns" in dialog.text
    (confirm,) = browser.find_all("dialog button.danger")
    assert not confirm.is_enabled()
    browser.find("#confirm-user").send_keys(user)
    browser.screenshot("forget")
    confirm.click()
    receipt = browser.find("main .notice", "Forgot")
    assert f"removed {len(CONVERSATION)} turns" in receipt.text
    browser.screenshot("forgotten")
    with server.client() as client:
        assert client.get(f"/v1/users/{user}").status_code == 404
    nothing_ran(browser)
    assert problems_in(browser.log()) == []


def test_keyboard_only_on_a_phone_sized_screen(server: ServerProcess) -> None:
    user = "kim"
    ingest(server, user)
    browser = Browser(server.url, phone=True)
    try:
        browser.sign_in(server.token)
        assert browser.driver.execute_script("return window.innerWidth") == PHONE[0]
        browser.go(f"u/{user}/tasks")
        browser.find(".task", "passport")
        assert browser.driver.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth"
        )
        # Tab from the top of the page to the task's "Mark done", and press Enter.
        browser.driver.execute_script("document.activeElement.blur()")
        body = browser.driver.switch_to.active_element
        for _ in range(40):
            body.send_keys(Keys.TAB)
            body = browser.driver.switch_to.active_element
            if body.get_attribute("data-move") == "done":
                break
        assert body.get_attribute("data-move") == "done"
        body.send_keys(Keys.ENTER)
        browser.find("main .notice", "is now done")
        browser.screenshot("phone-tasks")
        for view in ("timeline", "facts", "explain", "tiers", "router"):
            browser.go(f"u/{user}/{view}")
            browser.find("main h1", user)
            overflow = browser.driver.execute_script(
                "return document.documentElement.scrollWidth - window.innerWidth"
            )
            assert overflow <= 0, (view, overflow)
        browser.screenshot("phone-router")
    finally:
        browser.close()


@pytest.fixture
def framing_site(tmp_path: Path) -> Iterator[str]:
    """Another web site (python's http.server on localhost) with pages that frame others."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    yield f"http://localhost:{site.server_port}"
    site.shutdown()
    site.server_close()


def test_no_sign_in_when_the_daemon_asks_for_no_token(tmp_path: Path) -> None:
    """With auth.enabled = false (loopback only) the page opens on the users, with no sign-in
    form and no sign-out button."""
    server = ServerProcess(tmp_path / "data", MODEL_DIR, env={"MEMORYD_AUTH_ENABLED": "false"})
    browser = Browser(server.url)
    try:
        assert not (tmp_path / "data" / "token").exists()
        ingest(server, "open-user")
        browser.open()
        browser.find("table.users a", "open-user")
        assert browser.find_all("#token") == []
        assert not browser.find_all("#sign-out")[0].is_displayed()
    finally:
        browser.close()
        server.stop()


def test_the_page_cannot_be_framed(
    server: ServerProcess, browser: Browser, framing_site: str, tmp_path: Path
) -> None:
    """A page of another origin framing the inspector gets Chromium's error page in that frame,
    while the same page frames an ordinary page of a third origin."""
    (tmp_path / "plain.html").write_text("<p id=plain>framed fine</p>")
    (tmp_path / "frames.html").write_text(
        f'<iframe id="inspector" src="{server.url}/ui/"></iframe>'
        f'<iframe id="plain" src="{framing_site.replace("localhost", "127.0.0.1")}/plain.html">'
        "</iframe>"
    )
    browser.driver.get(f"{framing_site}/frames.html")

    def frame_location(name: str) -> str:
        browser.driver.switch_to.default_content()
        browser.driver.switch_to.frame(name)
        browser.wait(lambda d: d.execute_script("return document.readyState") == "complete")
        return str(browser.driver.execute_script("return location.href"))

    assert frame_location("plain").endswith("/plain.html")
    assert frame_location("inspector") == "chrome-error://chromewebdata/"
    assert browser.find_all("#main") == []


# -- the daemon's state ------------------------------------------------------------------------


def test_the_page_says_when_the_daemon_is_recovering_or_down(tmp_path: Path) -> None:
    """A daemon replaying 100 users' journals (each user's graph and vectors are rebuilt, as
    after a crash) reports "recovering"; the page says so, then goes on when it is ready; a
    stopped daemon is reported as not answering."""
    data = tmp_path / "data"
    first = ServerProcess(data, MODEL_DIR)
    with first.client() as client:
        turns = [
            {"session_id": "s", "role": "user", "text": f"Day {i}: I saw a heron by the river."}
            for i in range(40)
        ]
        client.post("/v1/users/u0/turns", json={"turns": turns}).raise_for_status()
    first.stop()
    for n in range(1, 100):
        (data / "users" / f"u{n}").mkdir(mode=0o700)
        shutil.copy(data / "users" / "u0" / "journal.sqlite", data / "users" / f"u{n}")

    server = ServerProcess(data, MODEL_DIR)
    browser = Browser(server.url)
    try:
        browser.sign_in(server.token)
        banner = browser.find("#daemon-state", "recovering")
        browser.screenshot("daemon-recovering")
        browser.wait(lambda _: not banner.is_displayed(), timeout=300)
        with server.client() as client:
            assert client.get("/readyz").json()["status"] == "ready"
        browser.find("table.users a", "u99")
        server.stop()
        browser.find("#daemon-state", "not answering")
        browser.screenshot("daemon-down")
    finally:
        browser.close()
        if server.proc.poll() is None:
            server.stop()
