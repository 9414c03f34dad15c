"""A real Chromium (Debian's, with its chromedriver) driven by Selenium, for the inspector's
tests: headless, its console log kept, screenshots written under build/ui-screenshots/."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from support.config import REPO

SCREENSHOTS = REPO / "build" / "ui-screenshots"
WAIT_S = 30
PHONE = (390, 844)  # CSS pixels of a common phone screen


def chromium_paths() -> tuple[str, str]:
    """Chromium and chromedriver (`make test` installs both from Debian when missing)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        raise RuntimeError(
            "the inspector's tests need Chromium and its driver: "
            "apt-get install chromium chromium-driver (make test does it)"
        )
    return browser, driver


class Browser:
    """One headless Chromium window on the daemon at ``url``."""

    def __init__(self, url: str, phone: bool = False, downloads: Path | None = None) -> None:
        binary, driver = chromium_paths()
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
            options.add_argument(arg)
        options.add_argument("--window-size=1200,900")
        if phone:  # a headless window is at least 500 px wide: emulate the phone's screen
            metrics = {"width": PHONE[0], "height": PHONE[1], "pixelRatio": 3, "touch": True}
            options.add_experimental_option("mobileEmulation", {"deviceMetrics": metrics})
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        if downloads is not None:  # files the page saves go there, without asking
            prefs = {
                "download.default_directory": str(downloads),
                "download.prompt_for_download": False,
            }
            options.add_experimental_option("prefs", prefs)
        self.driver = webdriver.Chrome(service=Service(driver), options=options)
        self.url = url
        self.console: list[dict[str, Any]] = []

    def close(self) -> None:
        self.driver.quit()

    def open(self, route: str = "") -> None:
        """The page at ``#/route`` (a new page load)."""
        self.driver.get(f"{self.url}/ui/#/{route}")

    def go(self, route: str) -> None:
        """Another view of the loaded page (a hash change, as a link does)."""
        self.driver.execute_script("location.hash = arguments[0]", f"#/{route}")

    def sign_in(self, token: str) -> None:
        self.open()
        self.find("#token").send_keys(token)
        self.find("form.sign-in button").click()
        self.find("main h1", "Users")

    def find(self, css: str, text: str = "", timeout: float = WAIT_S) -> WebElement:
        """The first shown element matching ``css`` whose text holds ``text``, once there is one."""
        return self.wait(lambda d: _shown(d, css, text), timeout)

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def click(self, css: str, text: str = "") -> None:
        self.find(css, text).click()

    def wait(self, condition: Callable[[webdriver.Chrome], Any], timeout: float = WAIT_S) -> Any:
        """``condition``'s first truthy value; an element the page replaced meanwhile is asked
        again (the views redraw after each action)."""
        waiting = WebDriverWait(
            self.driver,
            timeout,
            poll_frequency=0.1,
            ignored_exceptions=(StaleElementReferenceException,),
        )
        return waiting.until(condition)

    def main_text(self) -> str:
        return self.driver.find_element(By.TAG_NAME, "main").text

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def log(self) -> list[dict[str, Any]]:
        """Everything the page wrote to the console so far."""
        self.console += self.driver.get_log("browser")
        return self.console


def _shown(driver: webdriver.Chrome, css: str, text: str) -> WebElement | None:
    for element in driver.find_elements(By.CSS_SELECTOR, css):
        if element.is_displayed() and element.is_enabled() and text in element.text:
            return element
    return None
