#!/usr/bin/python3
"""Opens a `perseus report` HTML file in headless Chromium (Selenium + chromedriver) and checks it:
the page loads, the console has no SEVERE entries, every svg.chart has drawn elements and fills
its column (charts scale with the page), the tables have rows, the "what each slowdown saves"
table has its rows (+0 .. +10 %, least energy, each baseline next to Perseus at its time), the
timeline labels bars with their clocks, and no resource was fetched from the network; the "Your
plan" box comes first, names the plan the timeline shows, marks its table row, and gives the
commands to export and serve it; at 800 px the page does not overflow sideways. Saves a
full-page screenshot (and NAME-800px.png beside it).

Usage: check_report.py REPORT.html SCREENSHOT.png
Exit status 0 when every check passes, 1 otherwise (with one FAIL line per problem), 2 when the
browser tooling (python3-selenium, chromium, chromium-driver) is missing.
"""
import os
import shutil
import sys

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"
WIDTH = 1400
# Minimum drawn elements (rect, path, circle, line, polygon) per chart: the smallest report the
# tests make has far more; an empty or broken chart has only its frame.
MIN_DRAWN = {"frontier": 20, "timeline": 40, "sweep": 10, "saving": 8}
SAVING_ROWS = ["Perseus within +0 %", "Perseus within +1 %", "Perseus within +2 %",
               "Perseus within +5 %", "Perseus within +10 %", "Perseus, least energy",
               "EnvPipe balanced", "Perseus at EnvPipe balanced's time", "Zeus global",
               "Perseus at Zeus global's time"]


def missing_tools():
    problems = []
    try:
        import selenium  # noqa: F401
    except ImportError:
        problems.append("python3-selenium (import selenium failed)")
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.exists(path) or shutil.which(os.path.basename(path))):
            problems.append(f"{package} ({path} not found)")
    return problems


def start_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={WIDTH},1000", "--hide-scrollbars"):
        options.add_argument(arg)
    if os.path.exists(CHROMIUM):
        options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


COUNT_JS = """
const charts = Array.from(document.querySelectorAll('svg.chart'));
return charts.map(svg => ({
  kind: Array.from(svg.classList).filter(c => c !== 'chart').join(' '),
  drawn: svg.querySelectorAll('rect, path, circle, line, polygon').length,
  width: svg.getBoundingClientRect().width,
  height: svg.getBoundingClientRect().height,
  column: svg.parentElement.getBoundingClientRect().width,
}));
"""


def network_requests(driver):
    """URLs of requests other than the page itself (file:, data: and about: are local)."""
    import json
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if not url.startswith(("file:", "data:", "about:")):
                urls.append(url)
    return urls


def check(driver, report, screenshot):
    failures = []
    driver.get("file://" + os.path.abspath(report))
    state = driver.execute_script("return document.readyState")
    if state != "complete":
        failures.append(f"page did not finish loading (readyState {state})")
    if not driver.title:
        failures.append("page has no title")
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    failures += [f"console error: {e.get('message')}" for e in severe]
    failures += [f"network request: {url}" for url in network_requests(driver)]
    charts = driver.execute_script(COUNT_JS)
    kinds = sorted(c["kind"] for c in charts)
    if kinds != sorted(MIN_DRAWN):
        failures.append(f"expected charts {sorted(MIN_DRAWN)}, found {kinds}")
    for c in charts:
        least = MIN_DRAWN.get(c["kind"], 1)
        print(f"chart {c['kind']}: {c['drawn']} drawn elements, "
              f"{c['width']:.0f}x{c['height']:.0f} px")
        if c["drawn"] < least:
            failures.append(f"chart {c['kind']} has {c['drawn']} drawn elements (< {least})")
        if c["width"] < 100 or c["height"] < 100:
            failures.append(f"chart {c['kind']} is rendered {c['width']}x{c['height']} px")
        if abs(c["width"] - c["column"]) > 2:
            failures.append(f"chart {c['kind']} is {c['width']:.0f} px wide in a "
                            f"{c['column']:.0f} px column (it should scale with the page)")
    labels = driver.execute_script(
        "return Array.from(document.querySelectorAll('table.savings tbody tr')).map("
        "r => r.cells[0].textContent)")
    print(f"saving rows: {labels}")
    missing = [r for r in SAVING_ROWS if r not in labels]
    if missing:
        failures.append(f"the savings table lacks rows {missing}")
    clocks = driver.execute_script(
        "return document.querySelectorAll('svg.timeline text.clock').length")
    entries = driver.execute_script(
        "return document.querySelectorAll('svg.timeline rect.entry').length")
    print(f"timeline: {clocks} clock labels for {entries} bars")
    if entries == 0 or clocks < entries:
        failures.append(f"timeline: {clocks} clock labels for {entries} bars")
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('table')).map("
        "t => t.querySelectorAll('tbody tr').length)")
    print(f"table rows: {rows}")
    if len(rows) < 2 or min(rows) < 1:
        failures.append(f"expected two tables with rows, found rows {rows}")
    failures += check_your_plan(driver)
    failures += full_page_screenshot(driver, WIDTH, screenshot)
    failures += full_page_screenshot(driver, 800, screenshot.replace(".png", "-800px.png"))
    narrow = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    print(f"at 800 px: {narrow[0]} px of content in {narrow[1]} px")
    if narrow[0] > narrow[1]:
        failures.append(f"at 800 px the page is {narrow[0]} px wide: it overflows sideways")
    return failures


YOUR_PLAN_JS = """
const box = document.querySelector('section.your-plan');
if (!box) return null;
const first = document.querySelector('main > section');
const chosen = Array.from(document.querySelectorAll('table.plans tr.chosen')).map(
  r => r.cells[0].textContent);
const style = getComputedStyle(box);
return {first: first === box, heading: box.querySelector('h2').textContent,
        text: box.textContent, commands: (box.querySelector('pre.commands') || {}).textContent,
        chosen: chosen, timeline: document.querySelector('#timeline h2').textContent,
        border: style.borderTopWidth, visible: box.getBoundingClientRect().height > 40};
"""


def check_your_plan(driver):
    box = driver.execute_script(YOUR_PLAN_JS)
    if box is None:
        return ["no 'Your plan' box (section.your-plan)"]
    print(f"your plan: {box['heading']!r}; chosen rows {box['chosen']}")
    failures = []
    name = box["heading"].removeprefix("Your plan: ")
    if not box["first"] or not box["visible"]:
        failures.append("the 'Your plan' box is not the page's first, visible section")
    if not box["timeline"].endswith(name):
        failures.append(f"'Your plan' names {name!r}, the timeline {box['timeline']!r}")
    if box["chosen"] != [name]:
        failures.append(f"the plans table marks {box['chosen']} as chosen, not [{name!r}]")
    commands = box["commands"] or ""
    for needed in ("perseus plan export", "--index " + name.split("#")[1].split()[0],
                   "perseus serve --scheduler point-solution"):
        if needed not in commands:
            failures.append(f"'Your plan' commands lack {needed!r}: {commands!r}")
    if "% against all-max" not in box["text"] or "Energy -" not in box["text"]:
        failures.append(f"'Your plan' does not give the saving: {box['text']!r}")
    return failures


def full_page_screenshot(driver, width, path):
    """Makes the viewport `width` px wide and as tall as the document, then captures it."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 600, "deviceScaleFactor": 1, "mobile": False})
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": max(height, 600), "deviceScaleFactor": 1, "mobile": False})
    if not driver.save_screenshot(path):
        return [f"could not save the screenshot to {path}"]
    return []


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    report, screenshot = sys.argv[1], sys.argv[2]
    problems = missing_tools()
    if problems:
        print("FAIL: browser test tooling missing: " + ", ".join(problems) +
              " (install with: apt-get install chromium chromium-driver python3-selenium, or "
              "run scripts/install-deps.sh)", file=sys.stderr)
        return 2
    driver = start_browser()
    try:
        failures = check(driver, report, screenshot)
    finally:
        driver.quit()
    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
