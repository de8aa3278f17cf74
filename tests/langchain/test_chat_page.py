"""The example chat page in a real browser (headless Debian chromium driven by
Selenium through chromedriver), against the service served by uvicorn on
127.0.0.1: messages go in through the chat box until ARS compresses the
context, and the page shows the ``context_compression`` events with their
numbers, links that open the files (short names; the full path on hover and when
copied), the summary one click away, and the token gauge in plain words.

Skipped locally when chromium, chromedriver or Selenium is missing; under
``CI=true`` that is a failure. The screenshot is saved in the test's tmp
directory and at ``artifacts/chat-page.png`` (git-ignored)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ars_core import describe_event
from ars_langchain import event_from_state
from tests.langchain.test_sse_service import load_example
from tests.servers import LOCALHOST, free_port, unavailable

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


def find_browser() -> tuple[str, str]:
    """Debian's chromium and chromedriver, or skip (fail in CI) saying what is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        unavailable("Debian's chromium and chromium-driver are not installed")
    return chromium, driver


@pytest.fixture
def browser() -> Iterator[Any]:
    chromium, driver_path = find_browser()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        unavailable("selenium is not installed (the dev extra)")
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager download anything
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    profile = tempfile.mkdtemp(prefix="ars-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class ServedApp:
    """An ASGI app served by uvicorn in a thread on 127.0.0.1, stopped by the test."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        config = uvicorn.Config(app, host=LOCALHOST, port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    def __enter__(self) -> ServedApp:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def served_demo() -> Iterator[tuple[ServedApp, Any]]:
    example = load_example()
    setup = example.build_demo()
    with ServedApp(example.create_app(setup)) as served:
        yield served, setup


def short_name(path: str) -> str:
    """The page's name for a file: its base name, hex digests cut to 8 characters."""
    return re.sub(r"[0-9a-f]{12,}", lambda m: m.group()[:8] + "…", path.rsplit("/", 1)[-1])


def shorten(text: str, event: dict[str, Any]) -> str:
    """``text`` with the event's file paths replaced by their short names."""
    for path in [*event.get("offloaded", []), event.get("file_path")]:
        if path:
            text = text.replace(path, short_name(path))
    return text


#: true when an inline element is laid out in one box (not wrapped over lines)
ONE_LINE = "return arguments[0].getClientRects().length === 1;"
#: select an element's contents, fire a copy event, return what the page put on the clipboard
COPY = """
const range = document.createRange();
range.selectNodeContents(arguments[0]);
const sel = document.getSelection();
sel.removeAllRanges(); sel.addRange(range);
const ev = new ClipboardEvent("copy", {clipboardData: new DataTransfer(), bubbles: true,
                                       cancelable: true});
document.dispatchEvent(ev);
sel.removeAllRanges();
return ev.clipboardData.getData("text/plain");
"""


def wait_idle(driver: Any, timeout: float = 60) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    def done(d: Any) -> bool:
        state = d.find_element("id", "status").get_attribute("data-state")
        if state == "error":
            raise AssertionError(d.find_element("id", "status").text)
        return bool(state == "idle")

    WebDriverWait(driver, timeout).until(done)


def send(driver: Any, text: str) -> None:
    box = driver.find_element("id", "message")
    box.send_keys(text)
    driver.find_element("id", "send").click()
    wait_idle(driver)


@pytest.mark.spec("R30", "R31", "R33")
def test_chat_page_shows_compression_rounds_with_their_numbers_and_files(
    browser: Any, served_demo: tuple[ServedApp, Any], tmp_path: Path
) -> None:
    """Messages typed into the page stream their answers; the events panel shows each
    round's started and completed entries in the words of `describe_event`, with the
    tokens before/after and T; the L2 entry links to the archive, which opens through
    the service; the gauge shows the last request's size; a screenshot is saved."""
    served, setup = served_demo
    browser.get(f"{served.url}/?thread=browser-1")
    wait_idle(browser)
    questions = ["latency of the checkout API", "and the payment API?", "any errors on the cart?"]
    sent = 0
    for question in questions:
        send(browser, question)
        sent += 1
        if browser.find_elements("css selector", "li.event.completed[data-level='L2']"):
            break
    assert sent == 2  # L1 on the first message, L2 on the second (T = 1,024)

    answers = [e.text for e in browser.find_elements("css selector", ".msg.assistant")]
    assert answers == [
        "The logs for 'latency of the checkout API' show 300 requests, all served in under 90 ms.",
        "The logs for 'and the payment API?' show 300 requests, all served in under 90 ms.",
    ]
    entries = browser.find_elements("css selector", "#events li.event")
    events = [json.loads(e.get_attribute("data-event")) for e in entries]
    # three rounds (a call per model step): L1, L1, then L1 -> L2 on the second question
    assert [(e["phase"], e["level"]) for e in events] == [
        ("started", "L1"),
        ("completed", "L1"),
        ("started", "L1"),
        ("completed", "L1"),
        ("started", "L1"),
        ("completed", "L2"),
    ]
    for entry, event in zip(entries, events, strict=True):
        # the page and the helper say the same, the page naming files by their short names
        assert entry.text == shorten(describe_event(event), event)
        assert event["threshold"] == 1024 and event["tokens_before"] >= 1024
        assert f"{event['tokens_before']:,} " in entry.text and "T 1,024" in entry.text
        if event["phase"] == "completed":
            assert event["tokens_after"] < event["threshold"]
            assert f" → {event['tokens_after']:,} tokens" in entry.text
    l2 = events[-1]
    with httpx.Client(base_url=served.url) as client:
        state = client.get("/threads/browser-1/compression").json()
    persisted = state["summarization_event"]
    assert (l2["cutoff"], l2["file_path"]) == (persisted["cutoff"], persisted["file_path"])
    assert l2["file_path"].startswith("outputs/conversation_history/")

    gauge = browser.find_element("id", "gauge")
    assert int(gauge.get_attribute("data-tokens")) == l2["tokens_after"]
    assert gauge.text == f"{l2['tokens_after']:,} of 1,024 tokens"
    assert browser.find_element("id", "gauge-label").text == "Last request sent to the model"
    assert browser.find_element("id", "gauge-note").text == (
        "ARS compresses a request once it reaches 1,024 tokens: large tool results go to "
        "files, older messages into a summary."
    )
    assert browser.find_element("id", "history-tokens").text == (
        f"Whole conversation: 8 messages, about {state['conversation_tokens']:,} tokens "
        "(the model gets a summary of the older ones)."
    )
    assert state["conversation_tokens"] > l2["tokens_before"] > l2["tokens_after"]

    links = entries[-1].find_elements("css selector", "a.file")
    paths = [*l2["offloaded"], l2["file_path"]]
    assert [a.text for a in links] == [short_name(p) for p in paths]
    assert [a.get_attribute("title") for a in links] == paths  # the full path on hover
    assert all(len(a.text) <= 40 for a in links)
    # each name on one line (an inline element that wraps has several boxes)
    assert [browser.execute_script(ONE_LINE, a) for a in links] == [True] * len(links)
    # copying a name, or a whole entry, copies the full paths
    assert [browser.execute_script(COPY, a) for a in links] == paths
    assert browser.execute_script(COPY, entries[-1]) == describe_event(l2)

    # the summary, one click away: the L2 entry's "summary covers messages 1-5" opens it
    summary = browser.find_element("id", "summary")
    text = browser.find_element("id", "summary-text")
    assert summary.get_attribute("open") is None and not text.is_displayed()
    entries[-1].find_element("css selector", "a.summary-link").click()
    assert summary.get_attribute("open") is not None and text.is_displayed()
    expected = event_from_state(persisted)
    assert expected is not None and "latency of the checkout API" in expected.summary_message.text
    assert text.get_attribute("textContent") == expected.summary_message.text == state["summary"]
    assert browser.find_element("id", "summary-title").text == "Summary of messages 1-5"
    screenshot = tmp_path / "chat-page.png"
    assert browser.save_screenshot(str(screenshot))
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1400  # width
    artifacts = REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copyfile(screenshot, artifacts / "chat-page.png")

    archive_href = links[-1].get_attribute("href")
    assert archive_href == f"{served.url}/threads/browser-1/files/{l2['file_path']}"
    browser.get(archive_href)
    shown = browser.find_element("tag name", "body").text
    stored = setup.files.scoped("browser-1").read_text(l2["file_path"])
    assert shown == stored.strip() and "latency of the checkout API" in shown


@pytest.mark.spec("R33", "R44")
def test_reloading_the_page_shows_the_thread_from_the_checkpoint(
    browser: Any, served_demo: tuple[ServedApp, Any]
) -> None:
    """A reload (or another tab) rebuilds the conversation and the persisted summary
    from the checkpoint; another thread starts empty and gets its own answers."""
    served, _ = served_demo
    browser.get(f"{served.url}/?thread=reload-1")
    wait_idle(browser)
    send(browser, "latency of the checkout API")
    send(browser, "and the payment API?")
    browser.get(f"{served.url}/?thread=reload-1")
    wait_idle(browser)
    bubbles = [
        (e.get_attribute("class"), e.text)
        for e in browser.find_elements("css selector", "#conversation .msg")
    ]
    assert bubbles == [
        ("msg user", "latency of the checkout API"),
        (
            "msg assistant",
            "The logs for 'latency of the checkout API' show 300 requests, all served in under 90 ms.",
        ),
        ("msg user", "and the payment API?"),
        (
            "msg assistant",
            "The logs for 'and the payment API?' show 300 requests, all served in under 90 ms.",
        ),
    ]
    persisted = browser.find_element("id", "persisted").text
    assert persisted.startswith("checkpoint: 8 messages, summary covers 1-5, history in history-")
    # without a round seen, the gauge is the next request as it stands, the summary still there
    label = browser.find_element("id", "gauge-label").text
    assert label == "Next request, before ARS compresses it"
    assert browser.find_element("id", "summary-title").text == "Summary of messages 1-5"
    summary = browser.find_element("id", "summary")
    summary.find_element("tag name", "summary").click()
    assert browser.find_element("id", "summary-text").is_displayed()

    browser.get(f"{served.url}/?thread=other-2")
    wait_idle(browser)
    assert browser.find_elements("css selector", "#conversation .msg") == []
    send(browser, "disk usage on db-1")
    answers = [e.text for e in browser.find_elements("css selector", ".msg.assistant")]
    assert answers == [
        "The logs for 'disk usage on db-1' show 300 requests, all served in under 90 ms."
    ]
