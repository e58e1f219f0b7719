// The console's only script: the live task list of the Now page. It opens
// one server-sent event stream (the gateway's ownership watch) and updates
// the table as owners change; the time left counts down locally. Nothing
// is polled.
"use strict";
(function () {
  if (document.body.dataset.page !== "now") return;
  var table = document.getElementById("tasks");
  var state = document.getElementById("live-state");
  if (!table || !window.EventSource) return;
  var body = table.tBodies[0];

  function cell(tr, cls) { return tr.querySelector("td." + cls); }
  function row(ev) {
    var key = ev.tenant + "/" + ev.task;
    for (var i = 0; i < body.rows.length; i++) {
      if (body.rows[i].dataset.key === key) return body.rows[i];
    }
    var tr = document.createElement("tr");
    tr.dataset.key = key;
    var cols = ["tenant", "task", "owner", "epoch", "lease", "ttl", "fence", "version", "last"];
    cols.forEach(function (c) { var td = document.createElement("td"); td.className = c; tr.appendChild(td); });
    tr.cells[0].textContent = ev.tenant;
    tr.cells[1].textContent = ev.task;
    // Sorted by tenant, then task.
    var before = null;
    for (var j = 0; j < body.rows.length; j++) {
      if (body.rows[j].dataset.key > key) { before = body.rows[j]; break; }
    }
    body.insertBefore(tr, before);
    var none = document.getElementById("no-tasks");
    if (none) none.remove();
    return tr;
  }
  function apply(ev) {
    var tr = row(ev);
    var owned = ev.type !== "vacated" && !ev.stale;
    tr.className = (owned ? "owned" : "vacant") + " changed";
    cell(tr, "owner").textContent = owned ? ev.owner : "—";
    cell(tr, "epoch").textContent = owned ? String(ev.epoch) : "—";
    cell(tr, "lease").textContent = owned ? ev.lease : "—";
    var ttl = cell(tr, "ttl");
    ttl.dataset.deadline = owned && ev.ttl_left_seconds >= 0 ? String(Date.now() + ev.ttl_left_seconds * 1000) : "0";
    ttl.textContent = owned && ev.ttl_left_seconds >= 0 ? ev.ttl_left_seconds + "s" : "—";
    if (ev.fence_epoch) cell(tr, "fence").textContent = String(ev.fence_epoch);
    tr.dataset.revision = String(ev.revision || "");
  }
  function tick() {
    var now = Date.now();
    table.querySelectorAll("td.ttl").forEach(function (td) {
      var d = Number(td.dataset.deadline || 0);
      if (d > 0) td.textContent = Math.max(0, Math.ceil((d - now) / 1000)) + "s";
    });
  }
  setInterval(tick, 1000);

  var lastError = "";
  var es = new EventSource(document.querySelector("link[rel=stylesheet]").getAttribute("href").replace("static/console.css", "live"));
  es.onmessage = function (m) {
    var ev = JSON.parse(m.data);
    if (ev.type === "synced") {
      lastError = "";
      state.textContent = "live";
      state.className = "live on";
      document.body.dataset.live = "synced";
      return;
    }
    if (ev.type === "error") {
      lastError = ev.error;
      state.textContent = "not live: " + ev.error;
      state.className = "live off";
      return;
    }
    apply(ev);
    document.body.dataset.events = String(Number(document.body.dataset.events || 0) + 1);
  };
  es.onerror = function () {
    // A stream whose watches all ended closes after its error: keep
    // saying why while the browser tries again.
    state.textContent = lastError ? "not live: " + lastError + " (trying again)" : "reconnecting…";
    state.className = "live off";
    document.body.dataset.live = "";
  };
})();
