"""`hctune serve` in a real headless browser: Debian's chromium driven by Playwright (its
driver ships in the wheel; no browser is downloaded). Upload a trace, start a study and queue a
second, cancel the second through its button, watch the studies list refresh itself and the
first study's page update until it is done, open its views (history, importance, parallel
coordinates, the Pareto front), filter, sort and page its trial table, download malloc.c and
compile it."""

import os
import shutil
from pathlib import Path

import pytest

from search_support import need_hc, record_gawk_trace
from serve_support import Served, compiles, finished_db

pytestmark = pytest.mark.timeout(240)

CHROMIUM = os.environ.get("HCTUNE_CHROMIUM", "/usr/bin/chromium")


def test_upload_tune_download_in_chromium(tmp_path):
    if not os.path.exists(CHROMIUM) and not shutil.which("chromium"):
        pytest.skip(f"no chromium at {CHROMIUM} (the Debian package chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the pip package playwright is not installed")
    need_hc()
    trace = record_gawk_trace(tmp_path / "gawk.trace")
    srv = Served(tmp_path / "hctune.db", "--workers", 1, "--token", "tok-for-the-browser-tests")
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox"])
            page = browser.new_page(accept_downloads=True, bypass_csp=True)  # (wait_for_function)
            page.goto(srv.base + "/login")
            page.fill("input[name=token]", "tok-for-the-browser-tests")
            page.click("button[type=submit]")
            page.goto(srv.base + "/traces")
            page.set_input_files("input[name=file]", str(trace))
            page.click("#upload")
            page.wait_for_url("**/traces/1")
            assert "events" in page.content()
            page.goto(srv.base + "/studies")
            page.fill("input[name=trials]", "4")
            # HC alone (the default is every allocator installed): ticking its box chooses it
            page.check("input[name=allocators][value=hc]")
            assert page.is_checked("input[name=allocators_from][value=ticked]")
            page.click("#start")
            page.wait_for_url("**/studies/web-*")
            first = page.url
            # a second study waits for the one worker: cancel it through its button
            page.goto(srv.base + "/studies")
            page.fill("input[name=trials]", "3")
            page.click("#start")
            page.wait_for_url("**/studies/web-*")
            assert page.url != first
            page.wait_for_function("document.getElementById('state').textContent !== ''")
            page.once("dialog", lambda d: d.accept())
            page.click("#cancel")
            page.wait_for_function("document.getElementById('state').textContent === "
                                   "'cancelled'", timeout=30_000)
            # the studies list refreshes itself (no reload: the marker stays) as the first runs
            page.goto(srv.base + "/studies")
            page.evaluate("window.marker = 1")
            page.wait_for_function(
                "[...document.querySelectorAll('#studies-table tr')].some(r => "
                "r.textContent.includes('done')) && window.marker === 1", timeout=150_000)
            assert "cancelled" in page.inner_text("#studies-table")
            page.goto(first)
            # the page polls the JSON API and fills itself in while the worker runs
            page.wait_for_function("document.getElementById('state').textContent === 'done'",
                                   timeout=60_000)
            page.wait_for_selector("#trials tbody tr")
            rows = page.locator("#trials tbody tr").count()
            assert rows >= 4
            assert "footprint" in page.inner_text("#best")
            # a point per finished trial (a trial pruned once it had lost has none)
            assert 2 <= page.locator("#pareto circle.trial").count() <= rows
            # the Pareto view: the front ringed, listed under the plot and starred in the table
            n_front = page.locator("#pareto circle.front").count()
            assert n_front >= 1
            assert page.inner_text("#front-list").count("trial ") == n_front
            page.check("#filter input[name=front]")
            page.wait_for_function(f"document.querySelectorAll('#trials tbody tr').length === "
                                   f"{n_front}")
            assert "front=1" in page.url                  # the filter is kept in the address
            page.uncheck("#filter input[name=front]")
            page.click("#trials th[data-key=mem_ratio]")          # sort by footprint
            page.wait_for_function("document.querySelector('#trials th[data-key=mem_ratio]')"
                                   ".textContent.endsWith('▲')")
            mem = [float(x.rstrip("x")) for x in page.locator(
                "#trials tbody tr td:nth-child(4)").all_inner_texts() if x.strip()]
            assert len(mem) >= 2 and mem == sorted(mem), mem   # (a pruned trial has none)
            page.select_option("#filter select[name=limit]", "25")
            page.fill("#filter input[name=q]", "no knob holds this")
            page.wait_for_function("document.getElementById('range').textContent"
                                   ".startsWith('no trial')")
            page.fill("#filter input[name=q]", "")
            page.wait_for_function("document.getElementById('range').textContent"
                                   ".startsWith('trials 1–')")
            for k in ("history", "importance", "parallel"):     # Optuna's three views
                page.wait_for_function(f"document.getElementById('view-{k}').naturalWidth > 0",
                                       timeout=60_000)
            with page.expect_download() as dl:
                page.click("#dl-malloc")
            path = dl.value.path()
            compiles(open(path, "rb").read(), tmp_path)
            browser.close()
    finally:
        srv.stop()


def test_a_cross_origin_form_post_is_refused_in_chromium(tmp_path):
    """A page on another origin (another port of the same host) posts the service's study form
    and sends an upload with a no-cors fetch, as a forged page would: nothing is created."""
    if not os.path.exists(CHROMIUM) and not shutil.which("chromium"):
        pytest.skip(f"no chromium at {CHROMIUM} (the Debian package chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the pip package playwright is not installed")
    import http.server
    import threading
    srv = Served(tmp_path / "hctune.db")
    evil = (f'<form id="f" method="post" action="{srv.base}/studies">'
            '<input name="traces" value="1"><input name="trials" value="3"></form>'
            '<script>const fd = new FormData(); fd.append("file", new Blob(["x".repeat(100)]),'
            ' "a.trace"); fetch("' + srv.base + '/api/traces", {method: "POST", mode: '
            '"no-cors", body: fd}).finally(() => document.getElementById("f").submit());'
            '</script>').encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(evil)

        def log_message(self, *a):
            pass
    other = http.server.HTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox"])
            page = browser.new_page(bypass_csp=True)
            page.goto(f"http://127.0.0.1:{other.server_address[1]}/")
            page.wait_for_url(f"{srv.base}/studies", timeout=30_000)   # the form went
            assert "another origin" in page.content()
            browser.close()
        assert srv.request("GET", "/api/studies") == (200, [])
        assert srv.request("GET", "/api/traces") == (200, [])
        assert not any((Path(str(tmp_path / "hctune.db") + ".serve") / "traces").iterdir())
    finally:
        other.shutdown()
        srv.stop()


def test_the_studies_list_polls_only_while_its_tab_is_shown(tmp_path):
    """The studies list asks for its table every 5 s while the tab is shown, nothing while it
    is hidden, and again at once when it is shown again."""
    if not os.path.exists(CHROMIUM) and not shutil.which("chromium"):
        pytest.skip(f"no chromium at {CHROMIUM} (the Debian package chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the pip package playwright is not installed")
    srv = Served(tmp_path / "hctune.db")
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox"])
            page = browser.new_page(bypass_csp=True)
            asked = []
            page.on("request", lambda r: asked.append(r.url) if "part=table" in r.url else None)
            page.goto(srv.base + "/studies")
            for _ in range(100):                          # shown: a refresh after 5 s
                if asked:
                    break
                page.wait_for_timeout(200)
            assert len(asked) == 1
            page.wait_for_function("document.getElementById('studies-note').textContent"
                                   ".includes('last:')")
            page.evaluate("Object.defineProperty(document, 'hidden', {value: true, "
                          "configurable: true}); document.dispatchEvent(new Event("
                          "'visibilitychange'))")
            page.wait_for_timeout(5600)
            assert len(asked) == 1                        # hidden: none
            page.evaluate("Object.defineProperty(document, 'hidden', {value: false, "
                          "configurable: true}); document.dispatchEvent(new Event("
                          "'visibilitychange'))")
            page.wait_for_timeout(800)
            assert len(asked) == 2                        # shown again: at once
            assert "none yet" in page.inner_text("#studies-table")
            browser.close()
    finally:
        srv.stop()


def test_the_studies_list_says_when_its_session_ended(tmp_path):
    """With a token: after a logout (from another tab), the list's next refresh says the
    session ended instead of showing the login page in place of the list."""
    if not os.path.exists(CHROMIUM) and not shutil.which("chromium"):
        pytest.skip(f"no chromium at {CHROMIUM} (the Debian package chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the pip package playwright is not installed")
    from hctune import jobs
    from hctune.db import Database
    with Database(tmp_path / "hctune.db") as d:      # a study no worker takes
        jobs.enqueue(d, "waiting", [1], {"objective": "mem", "trials": 5})
    srv = Served(tmp_path / "hctune.db", env={**os.environ, "HCTUNE_TOKEN": "tok-for-the-browser-tests"})
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox"])
            tabs = browser.new_context(bypass_csp=True)
            page = tabs.new_page()
            page.goto(srv.base + "/login")
            page.fill("input[name=token]", "tok-for-the-browser-tests")
            page.click("button[type=submit]")
            page.goto(srv.base + "/studies")
            other = tabs.new_page()                      # another tab logs out
            other.goto(srv.base + "/studies")
            other.evaluate("fetch('/logout', {method: 'POST', headers: "
                           "{'X-Requested-With': 'hctune'}})")
            page.wait_for_function("document.getElementById('studies-note').textContent"
                                   ".includes('session ended')", timeout=20_000)
            assert page.locator("#studies-table").count() == 1
            assert page.locator("input[name=token]").count() == 0
            # a study's page, which polls the JSON API every second, says so too
            page.goto(srv.base + "/login")
            page.fill("input[name=token]", "tok-for-the-browser-tests")
            page.click("button[type=submit]")
            page.goto(srv.base + "/studies/waiting")
            page.wait_for_function("document.getElementById('count').textContent !== ''")
            other.evaluate("fetch('/logout', {method: 'POST', headers: "
                           "{'X-Requested-With': 'hctune'}})")
            page.wait_for_function("document.getElementById('error').textContent"
                                   ".includes('session ended')", timeout=20_000)
            assert page.inner_text("#state") == "queued"
            browser.close()
    finally:
        srv.stop()


def test_the_answer_trial_page_and_sortable_list_in_chromium(tmp_path):
    """Issue 33's views in a real browser (no worker: a finished study stored by hand): the
    one answer with its files, a trial row showing what it changes from generic linked to the
    trial's page, the studies list sorted by a heading, and
    the security headers leaving the page's own scripts working."""
    if not os.path.exists(CHROMIUM) and not shutil.which("chromium"):
        pytest.skip(f"no chromium at {CHROMIUM} (the Debian package chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the pip package playwright is not installed")
    srv = Served(finished_db(tmp_path))
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                         args=["--no-sandbox"])
            page = browser.new_page()   # the CSP on: no eval, selectors only
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("response", lambda r: r.status >= 400 and "favicon" not in r.url and
                    errors.append(f"{r.status} {r.url}"))
            page.goto(srv.base + "/studies/fin")
            page.wait_for_selector("#answer:has-text('chosen by')")
            answer = page.inner_text("#answer")
            assert answer.startswith("HC (Hasan & Chang 2006), changed from generic"), answer
            assert answer.startswith("HC (Hasan & Chang 2006), changed from generic (Table 6): "
                                     "QL_HIGH=16\n"), answer
            assert "hctune.env" in answer and "winner:" not in page.inner_text("body")
            page.wait_for_selector("#trials tbody a[href*='/trials/']")
            first = page.inner_text("#trials tbody tr:first-child")
            assert first.split("\t")[-2].startswith("QL_HIGH=") and "MONITOR" not in first, first
            page.click("#trials tbody tr:first-child a[href*='/trials/']")
            page.wait_for_url("**/studies/fin/trials/*")
            assert "The whole setting" in page.content()
            assert page.locator("#setting tr").count() >= 40
            page.goto(srv.base + "/studies")
            names = lambda: [r.split("\t")[0] for r in
                             page.inner_text("#studies-table").splitlines()[1:]]
            page.click("#studies-table th:first-child")       # by name, A to Z
            assert names() == sorted(names()), names()
            page.click("#studies-table th:first-child")       # Z to A
            assert names() == sorted(names(), reverse=True), names()
            assert errors == [], errors
            browser.close()
    finally:
        srv.stop()
