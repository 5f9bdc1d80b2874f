// The view's only script: live updates in place (server-sent events, then a
// fetch of the page itself, whose #main replaces this one), the seq slider,
// and the filter selects. No framework, nothing from another origin, no
// eval, no inline script (the Content-Security-Policy forbids it).
"use strict";
(function () {
  var status = document.getElementById("live-status");
  function say(text, cls) {
    if (!status) return;
    status.textContent = text;
    status.className = "badge " + (cls || "");
  }

  function bind(root) {
    var slider = root.querySelector("#seq-slider");
    var out = root.querySelector("#seq-out");
    if (slider) {
      slider.addEventListener("input", function () { if (out) out.textContent = slider.value; });
      slider.addEventListener("change", function () { slider.form.submit(); });
    }
    root.querySelectorAll("#filter select").forEach(function (s) {
      s.addEventListener("change", function () { s.form.submit(); });
    });
  }

  // openDetails remembers which folded values are open, by their place.
  function openDetails() {
    var open = [];
    document.querySelectorAll("#main details").forEach(function (d, i) { if (d.open) open.push(i); });
    return open;
  }

  var busy = false, again = false;
  function reload() {
    if (busy) { again = true; return; }
    busy = true;
    var open = openDetails();
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var cur = document.getElementById("main");
        if (!fresh || !cur) return;
        var focused = document.activeElement && document.activeElement.id;
        cur.replaceWith(document.adoptNode(fresh));
        var ds = document.querySelectorAll("#main details");
        open.forEach(function (i) { if (ds[i]) ds[i].open = true; });
        document.body.dataset.gen = fresh.dataset.gen;
        bind(fresh);
        if (focused) { var f = document.getElementById(focused); if (f && f.tagName !== "INPUT") f.focus(); }
        say("live · updated " + new Date().toLocaleTimeString(), "live");
      })
      .catch(function (e) { say("update failed: " + e.message, "warn"); })
      .finally(function () {
        busy = false;
        if (again) { again = false; reload(); }
      });
  }

  bind(document);
  var url = document.body.dataset.events;
  if (url && window.EventSource) {
    var es = new EventSource(url);
    es.addEventListener("gen", function (e) {
      if (e.data !== document.body.dataset.gen) reload();
      else say("live", "live");
    });
    es.onerror = function () { say("live updates paused: reconnecting", "warn"); };
  }
})();
