// nexa-gauge report: search, "failing only" / "has agent faults" / "regressed only" filters,
// sortable changes.
// Reads the page with textContent and toggles `hidden`; never writes markup from strings.
(function () {
  "use strict";
  var cases = Array.prototype.slice.call(document.querySelectorAll("details.case"));
  var search = document.getElementById("search");
  var failing = document.getElementById("failing-only");
  var regressed = document.getElementById("regressed-only");
  var agentFaults = document.getElementById("agent-faults-only");
  var shownCount = document.getElementById("shown-count");
  var noMatch = document.getElementById("no-match");
  var haystacks = null;

  function haystack(i) {
    if (haystacks === null) {
      haystacks = cases.map(function (c) {
        var parts = [];
        c.querySelectorAll("[data-search]").forEach(function (e) {
          parts.push(e.textContent);
        });
        return parts.join("\n").toLowerCase();
      });
    }
    return haystacks[i];
  }

  function apply() {
    var words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
    var onlyFailing = failing.checked;
    var onlyRegressed = regressed !== null && regressed.checked;
    var onlyAgentFaults = agentFaults !== null && agentFaults.checked;
    var shown = 0;
    cases.forEach(function (c, i) {
      var ok = (!onlyFailing || c.dataset.failing === "1") &&
        (!onlyRegressed || c.dataset.regressed === "1") &&
        (!onlyAgentFaults || c.dataset.agentFault === "1");
      if (ok && words.length) {
        var text = haystack(i);
        ok = words.every(function (w) { return text.indexOf(w) !== -1; });
      }
      c.hidden = !ok;
      if (ok) { shown += 1; }
    });
    shownCount.textContent = String(shown);
    noMatch.hidden = shown !== 0 || cases.length === 0;
  }

  if (search !== null) {
    search.addEventListener("input", apply);
    failing.addEventListener("change", apply);
    if (regressed !== null) { regressed.addEventListener("change", apply); }
    if (agentFaults !== null) { agentFaults.addEventListener("change", apply); }
  }

  // a link to a case (from the comparison table) or into one (a claim's source) opens it
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    var box = el !== null ? el.closest("details.case") : null;
    if (box !== null) {
      box.hidden = false;
      box.open = true;
      if (el !== box) { el.scrollIntoView(); }
    }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();

  // the changes table: sort by signed change (worst first, then best first) or by its size
  var table = document.getElementById("changes");
  if (table !== null) {
    var body = table.tBodies[0];
    var state = { key: "delta", dir: 1 };
    function value(row, key) {
      var raw = row.dataset.delta;
      if (raw === "") { return null; }
      var v = parseFloat(raw);
      return key === "abs" ? Math.abs(v) : v;
    }
    function sort(key, dir) {
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var va = value(a, key), vb = value(b, key);
        if (va === null || vb === null) { return (va === null) - (vb === null); }
        return dir * (va - vb);
      });
      rows.forEach(function (r) { body.appendChild(r); });
      table.querySelectorAll("button.sort").forEach(function (b) {
        var on = b.dataset.sort === key;
        b.parentNode.setAttribute("aria-sort", on ? (dir > 0 ? "ascending" : "descending") : "none");
      });
      state = { key: key, dir: dir };
    }
    table.querySelectorAll("button.sort").forEach(function (b) {
      b.addEventListener("click", function () {
        var key = b.dataset.sort;
        var dir = key === state.key ? -state.dir : (key === "abs" ? -1 : 1);
        sort(key, dir);
      });
    });
  }
})();
