"""gamma report: one self-contained HTML page, every value escaped; opened in headless Chromium."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import A, G, R, actor, log

import gamma
from gamma.audit.report import report
from gamma.cli import main

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "examples"
DOCS = Path(__file__).resolve().parent.parent / "docs"
AT = "2026-03-02T10:00:00Z"
EVIL = "<script>window.__pwned=1;document.title='PWNED'</script><img src=x onerror=\"window.__pwned=2\">"

def run_cli(*args: str) -> tuple[int, str]:
    """``gamma ARGS`` in-process as the console runs it (main configures the log to this stderr)."""
    runner = CliRunner()
    code = 0
    with runner.isolation() as (out, _err, _):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue().decode("utf-8")



def evil_log() -> tuple[gamma.Event, ...]:
    return log(
        A("F1", "note", EVIL),
        A("F2", "secret", EVIL + "SECRET-42", visibility={"roles": ["hr"]}),
        A("F3", "<b>key</b>", "x"),
        R("F3", reason=EVIL),
        G(fact="F2", role="legal"),
    )


def test_every_value_is_escaped() -> None:
    for auditor in (False, True):
        page = report(evil_log(), actor(), "2030-01-01T00:00:00Z", auditor=auditor)
        assert "<script>window" not in page and "<img" not in page and "<b>key" not in page
        assert page.count("<script>") == 1  # the page's own
        assert "&lt;script&gt;window.__pwned=1" in page


def test_withheld_values_only_for_the_auditor() -> None:
    events = evil_log()
    actor_page = report(events, actor(), "2030-01-01T00:00:00Z")
    auditor_page = report(events, actor(), "2030-01-01T00:00:00Z", auditor=True)
    assert "SECRET-42" not in actor_page
    assert "SECRET-42" in auditor_page


def test_self_contained_and_lists_every_fact() -> None:
    events = gamma.load_events(EXAMPLE / "acme.jsonl")
    alice = json.loads((EXAMPLE / "alice.json").read_text())
    page = report(events, alice, AT, compare="2026-03-01T09:30:00Z")
    assert not re.search(r"(src|href)=", page) and "http" not in page.replace("http-equiv", "")
    res = gamma.resolve(events, alice, AT)
    for fact in [a.fact for a in res.admitted] + [x.fact for x in res.excluded]:
        assert f'id="fact-{fact}"' in page
    assert res.policy in page and res.log in page and 'id="compare"' in page
    assert page.count("<svg") >= len(res.admitted)


def test_reads_without_help() -> None:
    """One legend for every timeline, a labelled axis, the comparison before the facts, and
    a fix in words (issue 32)."""
    events = gamma.load_events(EXAMPLE / "acme.jsonl")
    alice = json.loads((EXAMPLE / "alice.json").read_text())
    page = report(events, alice, AT, compare="2026-03-01T09:30:00Z")
    assert page.count('class="legend"') == 1 and "Reading a timeline" in page
    assert page.count("log order →") >= page.count('<svg class="timeline"') > 0
    assert page.index('id="compare"') < page.index('id="admitted"') < page.index('id="excluded"')
    assert "would not apply if asked before" in page and '{"kind"' not in page


def test_each_fact_is_rendered_once_with_its_dependencies_by_id() -> None:
    """A chain's report names each link's direct dependency, not the chain below it."""
    links = [A("F0", "k0", 0)] + [A(f"F{i}", f"k{i}", i, depends_on=[f"F{i - 1}"]) for i in range(1, 60)]
    page = report(log(*links, R("F0")), actor(), "2030-01-01T00:00:00Z")
    assert page.count('<details class="explain"') == 60
    assert page.count("F30 dependency_invalidated &lt;- F29") == 1
    assert "F28" not in page.split('data-fact="F30"')[2].split("</details>")[0]


def test_cli_report(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    args = ["report", str(EXAMPLE / "acme.jsonl"), "--actor", str(EXAMPLE / "alice.json"),
            "--at", AT, "--out", str(out), "--auditor"]
    assert run_cli(*args)[0] == 0
    assert "&quot;$40,000&quot;" in out.read_text()


# -- a real browser ---------------------------------------------------------------------


def _driver(profile: Path) -> Any:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        assert os.environ.get("GAMMA_REQUIRE_CHROMIUM") != "1", "GAMMA_REQUIRE_CHROMIUM=1: no chromium"
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (test extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1100,1500"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def _requests(browser: Any, page: str) -> list[str]:
    """Every request made, but to the browser's own pages and data: URLs (no network)."""
    urls = []
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            params = message["params"]
            url = params["request"]["url"]
            if not url.startswith(("chrome://", "data:")):  # browser-internal, no network
                urls.append(url)
    return urls


#: The pictures in docs/, each taken by the browser test below of a page it loads: name -> file.
PICTURES = {"acme": DOCS / "report-acme.png"}
#: The PNG text chunk naming the page a picture shows, by the sha256 of its HTML (deterministic,
#: unlike pixels across Chromium and font versions).
PAGE_KEY = b"gamma-report-sha256"
UPDATE = os.environ.get("GAMMA_UPDATE_PICTURES") == "1"


def png_text(data: bytes) -> dict[bytes, bytes]:
    """The tEXt chunks of a PNG, keyword -> text."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    found, at = {}, 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"tEXt":
            keyword, _, text = data[at + 8:at + 8 + length].partition(b"\0")
            found[keyword] = text
        at += 12 + length
    return found


def with_text(data: bytes, keyword: bytes, text: bytes) -> bytes:
    """The PNG with one tEXt chunk added after its header chunk."""
    body = b"tEXt" + keyword + b"\0" + text
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    end_of_header = 8 + 12 + struct.unpack(">I", data[8:12])[0]
    return data[:end_of_header] + chunk + data[end_of_header:]


def _check_picture(browser: Any, picture: Path, page: str) -> None:
    """The picture in docs/ shows this very page: retaken whole when GAMMA_UPDATE_PICTURES=1,
    else its recorded page hash must be the current page's (a stale picture fails)."""
    digest = hashlib.sha256(page.encode("utf-8")).hexdigest().encode("ascii")
    if UPDATE:
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(1100, min(int(height) + 100, 2300))  # the page's first screens
        picture.write_bytes(with_text(browser.get_screenshot_as_png(), PAGE_KEY, digest))
    recorded = png_text(picture.read_bytes()).get(PAGE_KEY)
    assert recorded == digest, (
        f"{picture.relative_to(DOCS.parent)} is stale: it shows another version of the page;"
        " retake it with GAMMA_UPDATE_PICTURES=1 pytest tests/test_report.py -k chromium"
    )


def test_every_picture_in_the_docs_is_taken_by_the_browser_test() -> None:
    """No picture in docs/ escapes the check: each is in PICTURES and names its page."""
    assert sorted(DOCS.glob("*.png")) == sorted(PICTURES.values())
    for picture in PICTURES.values():
        assert PAGE_KEY in png_text(picture.read_bytes()), picture


def test_report_in_headless_chromium(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    events = gamma.load_events(EXAMPLE / "acme.jsonl")
    alice = json.loads((EXAMPLE / "alice.json").read_text())
    evil = log(A("F1", "note", EVIL), A("F2", "x", EVIL, visibility={"roles": ["hr"]}))
    pages = {
        "acme": report(events, alice, AT),
        "evil": report(evil, actor(), "2030-01-01T00:00:00Z", auditor=True),
    }
    res = gamma.resolve(events, alice, AT)
    browser = _driver(tmp_path / "profile")
    try:
        for name, page in pages.items():
            path = tmp_path / f"{name}.html"
            path.write_text(page, encoding="utf-8")
            browser.get_log("performance")  # drop the browser's own start-up traffic
            browser.get(path.as_uri())
            assert browser.execute_script("return window.__pwned === undefined")
            assert browser.title != "PWNED"
            assert _requests(browser, path.as_uri()) == [path.as_uri()]  # the page itself, nothing else
            browser.save_screenshot(str(tmp_path / f"{name}.png"))
            assert (tmp_path / f"{name}.png").stat().st_size > 10_000
            if name in PICTURES:
                _check_picture(browser, PICTURES[name], page)
            if name == "evil":
                cell = browser.find_element(By.CSS_SELECTOR, "#fact-F1 .value")
                assert cell.text == json.dumps(EVIL)
                continue
            shown = {r.get_attribute("data-fact") for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-fact]")}
            assert shown == {a.fact for a in res.admitted} | {x.fact for x in res.excluded}
            assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-filter") == "all"
            for code in ("access_denied", "retracted", "all"):
                browser.find_element(By.CSS_SELECTOR, f'button[data-code="{code}"]').click()
                visible = {r.get_attribute("data-fact")
                           for r in browser.find_elements(By.CSS_SELECTOR, "tr.excluded") if r.is_displayed()}
                assert visible == {x.fact for x in res.excluded if code == "all" or code in x.codes}
    finally:
        browser.quit()
