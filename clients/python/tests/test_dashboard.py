"""The web dashboard (crates/daemon/dashboard/) in a real browser: Debian's ``chromium``, headless,
driven by ``chromium-driver`` through selenium, against three real nodes on loopback:

    alpha ── bravo ── charlie (serves the example procedures)

The browser opens alpha's dashboard with the token in the fragment (as ``ferry dashboard``
prints it), sees the mesh as alpha knows it (charlie two hops away, through bravo), makes calls
to charlie through the form and sees their results and timelines, one of them live while it
runs. Screenshots go to ``$FERRY_SCREENSHOTS`` (default: ``tests/screenshots/``, not kept in
git); docs/img/dashboard.png is one of them.

Without chromium and chromedriver the tests are skipped, unless ``FERRY_REQUIRE_BROWSER=1``
(CI) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver import Chrome as WebDriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import wait_for_peer
from nodes import Node, example_rpc_section, wait_until

SCREENSHOTS = Path(
    os.environ.get("FERRY_SCREENSHOTS") or Path(__file__).resolve().parent / "screenshots"
)
#: How long the page may take to show what the node knows (it refreshes every 2 s).
SEE = 20.0


def _browser_paths() -> tuple[str, str] | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium and driver:
        return chromium, driver
    return None


class Mesh:
    """alpha ── bravo ── charlie; charlie serves examples/node.toml's procedures."""

    def __init__(self, directory: Path) -> None:
        self.bravo = Node(directory, "bravo")
        self.charlie = Node(
            directory, "charlie", peers=(self.bravo.tcpcl,), config=example_rpc_section()
        )
        self.alpha = Node(directory, "alpha", peers=(self.bravo.tcpcl,))
        wait_for_peer(self.alpha, "dtn://bravo/")
        wait_for_peer(self.charlie, "dtn://bravo/")

        def charlie_routed() -> bool:
            r = httpx.get(
                f"http://{self.alpha.api}/v1/routes",
                headers={"Authorization": f"Bearer {self.alpha.token}"},
                timeout=5,
            )
            return any(x["destination"] == "dtn://charlie/" for x in r.json())

        wait_until("alpha has a route to charlie", 20, charlie_routed, self.alpha.log())

    def stop(self) -> None:
        for node in (self.alpha, self.bravo, self.charlie):
            if node.process is not None:
                node.stop()


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    m = Mesh(tmp_path_factory.mktemp("dashboard"))
    try:
        yield m
    finally:
        m.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    paths = _browser_paths()
    if paths is None:
        if os.environ.get("FERRY_REQUIRE_BROWSER") == "1":
            pytest.fail("FERRY_REQUIRE_BROWSER=1 but chromium or chromedriver is missing")
        pytest.skip("SKIPPED: no chromium and chromedriver (apt-get install chromium chromium-driver)")
    chromium, driver_path = paths
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1100",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--lang=en-GB",
    ):
        options.add_argument(arg)
    # The console, to check that the page broke no policy and failed no request.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = WebDriver(service=Service(executable_path=driver_path), options=options)
    except WebDriverException as e:
        pytest.fail(f"chromium did not start under chromedriver: {e}")
    driver.set_page_load_timeout(20)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(
    driver: WebDriver, what: str, condition: Callable[[WebDriver], object], limit: float = SEE
) -> object:
    try:
        return WebDriverWait(driver, limit, poll_frequency=0.1).until(
            condition, message=f"not within {limit} s: {what}"
        )
    except Exception:
        driver.save_screenshot(str(SCREENSHOTS / "failure.png"))
        raise


def _text(driver: WebDriver, css: str) -> str:
    return "\n".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, css))


def _screenshot(driver: WebDriver, name: str) -> None:
    """The whole page, however long, into SCREENSHOTS/name."""
    width = driver.get_window_size()["width"]
    height = driver.get_window_size()["height"]
    inner = int(driver.execute_script("return window.innerHeight"))
    page = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(width, page + (height - inner))
    try:
        driver.save_screenshot(str(SCREENSHOTS / name))
    finally:
        driver.set_window_size(width, height)


def _console(driver: WebDriver) -> list[dict[str, object]]:
    """The browser console's messages since the last look."""
    logs: list[dict[str, object]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return logs


def _open(driver: WebDriver, node: Node) -> None:
    driver.get(f"http://{node.api}/#token={node.token}")
    _wait(driver, "the node's id in the header", lambda d: _text(d, "#node-id") == node.node_id)


def test_without_a_token_the_page_asks_for_it_and_keeps_it_out_of_the_address(
    mesh: Mesh, browser: WebDriver
) -> None:
    browser.get(f"http://{mesh.alpha.api}/")
    # A fresh tab of the same origin may still hold a token from another test: forget it.
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"http://{mesh.alpha.api}/")
    _wait(browser, "the token prompt", lambda d: d.find_element(By.ID, "login").is_displayed())
    _screenshot(browser, "login.png")
    field = browser.find_element(By.ID, "token-input")
    field.send_keys("0" * 64 + Keys.ENTER)
    _wait(
        browser,
        "a wrong token refused",
        lambda d: "refused the token" in _text(d, "#banner"),
    )
    field = browser.find_element(By.ID, "token-input")
    field.send_keys(mesh.alpha.token + Keys.ENTER)
    _wait(browser, "alpha's id", lambda d: _text(d, "#node-id") == "dtn://alpha/")

    # From the fragment: taken, then gone from the address.
    browser.execute_script("sessionStorage.clear()")
    _open(browser, mesh.alpha)
    assert "token" not in browser.current_url, browser.current_url


def test_a_call_through_the_form_shows_its_result_and_timeline(
    mesh: Mesh, browser: WebDriver
) -> None:
    _open(browser, mesh.alpha)
    _console(browser)  # what earlier tests left (a refused token) is not this test's
    # The mesh as alpha knows it: bravo a neighbour, charlie behind it.
    for node in ("dtn://bravo/", "dtn://charlie/"):
        drawn = f'#mesh g.node[data-node="{node}"]'
        _wait(browser, f"{node} in the mesh drawing", lambda d: d.find_elements(By.CSS_SELECTOR, drawn))
    _wait(browser, "bravo among the peers", lambda d: "dtn://bravo/" in _text(d, "#peers tbody"))
    _wait(browser, "charlie among the routes", lambda d: "dtn://charlie/" in _text(d, "#routes"))

    def call(target: str, procedure: str, params: str) -> None:
        Select(browser.find_element(By.ID, "call-mode")).select_by_value("explicit")
        for field, value in (
            ("call-target", target),
            ("call-procedure", procedure),
            ("call-params", params),
        ):
            element = browser.find_element(By.ID, field)
            element.clear()
            element.send_keys(value)
        browser.find_element(By.ID, "call-submit").click()

    # A call that is refused: its reason shows.
    call("charlie", "nope", "")
    _wait(browser, "the refusal", lambda d: _text(d, "#detail-state") == "failed")
    assert "not_offered" in _text(browser, "#detail-result")

    # A slow call, followed live: the page shows it waiting, acknowledged, then done.
    call("charlie", "slow", "int:2")
    _wait(browser, "the slow call waiting", lambda d: _text(d, "#detail-state") == "waiting")
    _wait(browser, "its watcher live", lambda d: _text(d, "#detail-watch") == "live")
    _wait(
        browser,
        "the ack in the timeline while it runs",
        lambda d: "ack from dtn://charlie/" in _text(d, "#timeline")
        and _text(d, "#detail-state") == "waiting",
    )
    _wait(browser, "the slow call's end", lambda d: _text(d, "#detail-state") == "succeeded")
    assert "slept 2 s" in _text(browser, "#detail-result")

    # A bundle for a node nobody knows waits in alpha's store.
    sent = httpx.post(
        f"http://{mesh.alpha.api}/v1/bundles",
        headers={"Authorization": f"Bearer {mesh.alpha.token}"},
        json={"destination": "dtn://delta/inbox", "payload": "for delta", "lifetime": "1h"},
        timeout=10,
    )
    assert sent.status_code == 201, sent.text
    _wait(browser, "the bundle in the store", lambda d: "dtn://delta/inbox" in _text(d, "#bundles"))

    # What another node sends is shown as text, never as HTML: a result that is markup stays
    # markup on the screen and makes no element (nor loads anything).
    markup = '<img id="injected" src="/nowhere.png"><b>bold</b>'
    call("charlie", "echo", markup)
    _wait(browser, "the markup's echo", lambda d: markup in _text(d, "#detail-result"))
    assert browser.find_elements(By.ID, "injected") == []

    # The call of the README's screenshot.
    call("charlie", "echo", "hello from the dashboard")
    _wait(
        browser,
        "echo's result",
        lambda d: "hello from the dashboard" in _text(d, "#detail-result"),
    )
    _wait(browser, "echo succeeded", lambda d: _text(d, "#detail-state") == "succeeded")
    timeline = _text(browser, "#timeline")
    assert "called dtn://charlie/" in timeline, timeline
    assert "result from dtn://charlie/" in timeline, timeline
    assert "succeeded" in timeline, timeline
    # Every call in the list, newest first; charlie served them.
    calls = _text(browser, "#calls tbody")
    assert calls.splitlines()[0].split()[1:3] == ["echo", "charlie"], calls
    _wait(
        browser,
        "four calls counted",
        lambda d: _text(d, "#calls-count").startswith("4 made"),
    )
    _screenshot(browser, "dashboard.png")

    # The page loaded nothing from elsewhere and broke no policy.
    problems = [e for e in _console(browser) if e.get("level") == "SEVERE"]
    assert problems == [], problems


def test_the_served_node_shows_its_procedures_and_the_calls_it_served(
    mesh: Mesh, browser: WebDriver
) -> None:
    _open(browser, mesh.charlie)
    _wait(
        browser,
        "charlie's procedures",
        lambda d: all(p in _text(d, "#procedures") for p in ("echo", "photo", "slow", "sum")),
    )
    _wait(
        browser,
        "the calls charlie served",
        lambda d: "served" in _text(d, "#calls-count") and " 0 served" not in _text(d, "#calls-count"),
    )
    served = _text(browser, "#served tbody")
    for procedure in ("echo", "slow"):  # (echo twice)
        assert any(
            line.split()[1:5] == [procedure, "alpha", "explicit", "answered"]
            for line in served.splitlines()
        ), served
    _screenshot(browser, "dashboard-charlie.png")
