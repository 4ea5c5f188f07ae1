/// `GET /`: an infinite-scroll page over any feed, built into the binary with nothing to fetch
/// but the API (SPEC §11). `/?feed=F` opens feed F.
///
/// It reads a feed the way the apps this project began from do: the next page when the reader
/// nears the bottom (always the page after the last one shown, so never one twice and never a
/// gap), a spinner while it is on its way, pull-to-refresh (the button, or pulling down at the
/// top on a touch screen) for a new generation, and a status line: "reached the end",
/// "refreshing", "source failing: …". Once at the end of a feed that may grow, it follows the
/// feed over Server-Sent Events and appends new pages as they come.
enum ScrollPage {
    static var answer: HTTPAnswer {
        var answer = HTTPAnswer(status: 200, contentType: "text/html; charset=utf-8", body: html)
        answer.header("Cache-Control", "no-cache")
        answer.header(
            "Content-Security-Policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'")
        answer.header("Referrer-Policy", "no-referrer")
        return answer
    }

    private static let html = Array(#"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>feedd</title>
    <style>
      :root { color-scheme: light dark; --line: #8884; --accent: #2a6fdb; }
      body { margin: 0; font: 15px/1.45 system-ui, sans-serif; }
      header { position: sticky; top: 0; display: flex; gap: .6em; align-items: center; flex-wrap: wrap;
               padding: .6em 1em; background: Canvas; border-bottom: 1px solid var(--line); z-index: 1; }
      header h1 { font-size: 1.1em; margin: 0 .4em 0 0; }
      #status { flex: 1 1 100%; font-size: .9em; min-height: 1.3em; color: GrayText; }
      #status.failing { color: #c0392b; }
      main { max-width: 52em; margin: 0 auto; padding: 0 1em 4em; }
      section.page h2 { font-size: .8em; font-weight: 600; color: GrayText; margin: 1.2em 0 .3em;
                        text-transform: uppercase; letter-spacing: .05em; }
      ol { list-style: none; margin: 0; padding: 0; }
      li.item { padding: .5em .7em; border: 1px solid var(--line); border-radius: 6px; margin: .35em 0;
                white-space: pre-wrap; word-break: break-word; font: 13px/1.4 ui-monospace, monospace; }
      #spinner { display: none; width: 1.6em; height: 1.6em; margin: 1.5em auto; border-radius: 50%;
                 border: 3px solid var(--line); border-top-color: var(--accent); animation: spin .8s linear infinite; }
      #spinner.on { display: block; }
      #pull { height: 0; overflow: hidden; text-align: center; color: GrayText; transition: height .15s; }
      @keyframes spin { to { transform: rotate(360deg); } }
    </style>
    </head>
    <body>
    <header>
      <h1>feedd</h1>
      <select id="feed" aria-label="feed"></select>
      <button id="refresh" type="button">Refresh</button>
      <label><input id="follow" type="checkbox" checked> follow</label>
      <input id="token" type="password" placeholder="bearer token" hidden>
      <div id="status" role="status" aria-live="polite"></div>
    </header>
    <div id="pull">release to refresh</div>
    <main><div id="pages"></div><div id="spinner" aria-label="loading"></div><div id="sentinel"></div></main>
    <script>
    "use strict";
    const $ = (id) => document.getElementById(id);
    const state = { feed: null, generation: 0, last: 0, loading: false, ended: false, finished: false, events: null, epoch: 0, retry: null };

    function setStatus(text, failing) {
      $("status").textContent = text;
      $("status").classList.toggle("failing", !!failing);
    }
    function headers() {
      const token = $("token").value || sessionStorage.getItem("feedd-token");
      return token ? { Authorization: "Bearer " + token } : {};
    }
    async function api(path, options) {
      const response = await fetch(path, Object.assign({ headers: headers(), cache: "no-store" }, options));
      const body = await response.json().catch(() => ({}));
      if (response.status === 401) { $("token").hidden = false; }
      return { status: response.status, body };
    }

    function show(page) {
      // Only the page after the last one shown, of the generation shown: never twice, never a gap.
      if (page.generation !== state.generation || page.page !== state.last + 1) return false;
      const section = document.createElement("section");
      section.className = "page";
      section.dataset.generation = page.generation;
      section.dataset.page = page.page;
      const title = document.createElement("h2");
      title.textContent = "page " + page.page;
      const list = document.createElement("ol");
      for (const item of page.items) {
        const entry = document.createElement("li");
        entry.className = "item";
        entry.dataset.id = item.id;
        entry.textContent = typeof item.data === "string" ? item.data : JSON.stringify(item.data);
        list.appendChild(entry);
      }
      section.append(title, list);
      $("pages").appendChild(section);
      state.last = page.page;
      if (page.last) state.finished = true;
      return true;
    }

    function reachedEnd() {
      state.ended = true;
      setStatus(state.finished ? "reached the end" : "reached the end; new pages appear here as they come");
      follow();
    }

    async function loadNext() {
      if (!state.feed || state.loading || state.ended) return;
      state.loading = true;
      const epoch = state.epoch;
      $("spinner").classList.add("on");
      try {
        const { status, body } = await api(`/v1/feeds/${state.feed}/pages?after=${state.last}&count=1`);
        if (epoch !== state.epoch) return;
        if (status === 200) {
          if (state.generation === 0) state.generation = body.generation;
          if (body.generation !== state.generation) return restart(body.generation);
          body.pages.forEach(show);
          if (!$("status").classList.contains("failing") || body.pages.length) setStatus("");
          if (body.end) reachedEnd();
        } else if (body.code === "upstream") {
          setStatus("source failing: " + body.message, true);
          state.retry = setTimeout(() => { state.retry = null; nearBottom(); }, Math.max(body.retry_in_ms || 1000, 250));
        } else {
          setStatus((body.message || "HTTP " + status), true);
        }
      } catch (error) {
        if (epoch === state.epoch) setStatus("cannot reach feedd: " + error.message, true);
      } finally {
        if (epoch === state.epoch) {
          state.loading = false;
          $("spinner").classList.remove("on");
          if (!state.retry) requestAnimationFrame(nearBottom);
        }
      }
    }

    function nearBottom() {
      if ($("sentinel").getBoundingClientRect().top < innerHeight + 200) loadNext();
    }

    function follow() {
      if (!$("follow").checked || state.finished || state.events || !state.feed) return;
      const events = new EventSource(`/v1/feeds/${state.feed}/events?after=${state.last}`);
      state.events = events;
      events.addEventListener("page", (event) => {
        const page = JSON.parse(event.data);
        if (show(page)) setStatus(state.finished ? "reached the end" : "following: page " + page.page + " came live");
      });
      events.addEventListener("refreshed", (event) => restart(JSON.parse(event.data).generation));
      events.addEventListener("end", () => { state.finished = true; setStatus("reached the end"); });
      events.addEventListener("upstream", (event) => setStatus("source failing: " + JSON.parse(event.data).message, true));
    }

    function unfollow() {
      if (state.events) state.events.close();
      state.events = null;
    }

    function restart(generation) {
      unfollow();
      clearTimeout(state.retry);
      Object.assign(state, { generation: generation || 0, last: 0, loading: false, ended: false, finished: false, retry: null });
      state.epoch += 1;
      $("pages").replaceChildren();
      $("spinner").classList.remove("on");
      nearBottom();
    }

    async function refresh() {
      if (!state.feed) return;
      unfollow();
      setStatus("refreshing");
      const { status, body } = await api(`/v1/feeds/${state.feed}/refresh`, { method: "POST" });
      if (status !== 200) return setStatus(body.message || "HTTP " + status, true);
      setStatus("");
      restart(body.generation);
    }

    function open(feed) {
      state.feed = feed;
      history.replaceState(null, "", "?feed=" + encodeURIComponent(feed));
      restart(0);
    }

    // Pull to refresh on touch screens: pull down at the top and let go.
    let pullStart = null;
    addEventListener("touchstart", (event) => { pullStart = scrollY === 0 ? event.touches[0].clientY : null; }, { passive: true });
    addEventListener("touchmove", (event) => {
      if (pullStart === null) return;
      $("pull").style.height = Math.min(Math.max(event.touches[0].clientY - pullStart, 0), 80) + "px";
    }, { passive: true });
    addEventListener("touchend", () => {
      const pulled = parseInt($("pull").style.height || "0", 10);
      $("pull").style.height = "0";
      if (pullStart !== null && pulled >= 70) refresh();
      pullStart = null;
    });

    $("refresh").addEventListener("click", refresh);
    $("feed").addEventListener("change", () => open($("feed").value));
    $("follow").addEventListener("change", () => ($("follow").checked ? state.ended && follow() : unfollow()));
    $("token").addEventListener("change", () => { sessionStorage.setItem("feedd-token", $("token").value); open($("feed").value); });
    addEventListener("scroll", nearBottom, { passive: true });
    addEventListener("resize", nearBottom);

    (async () => {
      const { body } = await api("/v1/feeds");
      const feeds = body.feeds || [];
      const wanted = new URLSearchParams(location.search).get("feed");
      if (wanted && !feeds.includes(wanted)) feeds.unshift(wanted);
      for (const name of feeds) $("feed").add(new Option(name, name));
      if (!feeds.length) return setStatus("no feeds");
      $("feed").value = wanted || feeds[0];
      open($("feed").value);
    })();
    </script>
    </body>
    </html>
    """#.utf8)
}
