"""The server's HTML status page in a real browser (headless Debian chromium via Selenium): it
loads without console errors or outside requests, lists every job with its state (and the ranks
that did not measure the latest round's energy), and links to the job's JSON. Skipped when the browser tooling is not installed."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "browser"))
import check_report  # noqa: E402  (browser helpers shared with the report test)
from conftest import result_body  # noqa: E402


@pytest.mark.skipif(bool(check_report.missing_tools()), reason="browser tooling missing")
def test_status_page_in_chromium(server_factory, tmp_path):
    server = server_factory("all-max", {"microbatches": 2})
    done = server.register_job(pp=2, metadata="finished")
    server.register_ranks(done, pp=2)
    server.schedules(done, [0, 1])
    waiting = server.register_job(pp=4, metadata="waiting")
    # A profiler job whose rank's energy counter did not change in round 0.
    unmeasured = server.register_job(pp=1, scheduler="profiler",
                                     scheduler_args={"microbatches": 1, "min_window": 0})
    server.register_ranks(unmeasured, pp=1)
    server.schedules(unmeasured, [0])
    body = result_body(0, ["forward", "backward"], joules=0.0, round_=0)
    body["energy_measured"] = False
    assert server.post(f"/result/{unmeasured}", body) == (200, None)
    driver = check_report.start_browser()
    try:
        driver.get(server.url + "/")
        assert driver.title == "Perseus control plane"
        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert severe == []
        outside = [u for u in check_report.network_requests(driver)
                   if not u.startswith(server.url)]
        assert outside == []
        rows = driver.find_elements("css selector", "tbody tr")
        assert len(rows) == 3
        text = [row.text for row in rows]
        assert done in text[0] and "done" in text[0] and "2 / 2" in text[0]
        assert waiting in text[1] and "registering" in text[1] and "0 / 4" in text[1]
        assert unmeasured in text[2], text[2]
        assert "(the latest round's energy was not measured by rank 0)" in text[2], text[2]
        assert "not measured" not in text[0]
        link = rows[0].find_element("css selector", "a").get_attribute("href")
        assert link == f"{server.url}/jobs/{done}"
        driver.save_screenshot(str(tmp_path / "status.png"))
        assert (tmp_path / "status.png").stat().st_size > 5000
    finally:
        driver.quit()
