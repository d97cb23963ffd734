(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("span-data").textContent);
  var panel = document.getElementById("attr-panel");
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function valueNode(v, key) {
    if (key === "stacktrace" && typeof v === "string") return el("pre", "stacktrace", v);
    if (v !== null && typeof v === "object") {
      var pre = el("pre", "json");
      pre.textContent = JSON.stringify(v, null, 2);
      return pre;
    }
    return document.createTextNode(String(v));
  }
  function table(obj, cls, sort) {
    var t = el("table", cls), keys = Object.keys(obj);
    if (sort) keys.sort();
    if (!keys.length) t.appendChild(el("tr")).appendChild(el("td", "hint", "(none)"));
    keys.forEach(function (k) {
      var tr = el("tr"), td = el("td");
      tr.appendChild(el("th", null, k));
      td.appendChild(valueNode(obj[k], k));
      tr.appendChild(td);
      t.appendChild(tr);
    });
    return t;
  }
  function section(title, node) { panel.appendChild(el("h3", null, title)); panel.appendChild(node); }
  function select(id) {
    var s = data.spans[id];
    if (!s) return;
    document.querySelectorAll(".row.selected").forEach(function (r) { r.classList.remove("selected"); });
    var row = document.querySelector('.row[data-span-id="' + id + '"]');
    if (row) row.classList.add("selected");
    panel.replaceChildren();
    panel.setAttribute("data-span-id", id);
    panel.appendChild(el("h2", null, s.name));
    if (s.note) panel.appendChild(el("p", "note", "⚠ " + s.note));
    section("Span", table({"span id": id, "parent span id": s.parent || "(root)", "category": s.category,
      "start": "+" + s.offset, "duration": s.duration, "status": s.status, "span kind": s.otel_kind,
      "service": s.service || "-"}, "span-fields", false));
    if (s.exception) section("Exception", table(s.exception, "exception", false));
    section("Attributes", table(s.attributes, "attributes", true));
    if (s.events.length) section("Events", valueNode(s.events));
    if (s.links.length) section("Links", valueNode(s.links));
  }
  document.getElementById("rows").addEventListener("click", function (ev) {
    var target = ev.target.closest("[data-span-id]");
    if (target) select(target.getAttribute("data-span-id"));
  });
  document.getElementById("rows").addEventListener("keydown", function (ev) {
    var target = ev.target.closest(".row");
    if (target && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      select(target.getAttribute("data-span-id"));
    }
  });
  function fromHash() {
    var m = /select=([0-9a-fA-F]+)/.exec(location.hash);
    if (!m) return;
    var bar = document.querySelector('.span-bar[data-span-id="' + m[1].toLowerCase() + '"]');
    if (!bar) return;
    // A real click event, so the same listener as a mouse click fills the panel.
    bar.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    bar.closest(".row").scrollIntoView({block: "center"});
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
