"""One HTML page of the published site: its styles, its frame and escaping. Below both the
report's site (`report.site`) and the watch's pages (`watch.page`), which share it, so that
every page looks the same and every text from a result or an index is escaped one way."""

from __future__ import annotations

import html

CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:110rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.25rem .45rem;vertical-align:top;text-align:left}
th{background:#f3f3f3}
td.ok{background:#eaf7ea}td.error,td.crash,td.oom,td.timeout{background:#fbe3e3}
td.unsupported{background:#e8eefb}td.unavailable{background:#fdf5dc}td.flag{background:#ffe9c7;font-weight:bold}
pre{background:#f6f6f6;padding:.6rem;overflow-x:auto;font-size:.8rem;white-space:pre-wrap}
.note{color:#555;font-size:.85rem;max-width:60rem}a.ref{font-size:.75rem;color:#555}
td:target{outline:2px solid #d08000}img{max-width:100%;border:1px solid #ddd;margin:.3rem}
"""


def e(text: object) -> str:
    return html.escape(str(text), quote=True)


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
            f"<style>{CSS}</style></head>\n<body>\n<h1>{e(title)}</h1>\n{body}\n</body></html>\n")


# The filter bar of a published table (the atlas's, the portability grid's): each <select> lists the
# values its filter reads, and the choice lives in the address's fragment (#name=value&...), so a link
# shows what its sender chose. `filterBar(selects, values, apply)`: `values(name)` lists a filter's
# values, `apply(want)` shows what `want` ({name: value}, the filters set) asks.
FILTER_BAR_JS = """function filterBar(selects, values, apply) {
  selects.forEach(function (s) {
    values(s.dataset.filter).forEach(function (v) {
      var o = document.createElement("option"); o.value = v; o.textContent = v; s.appendChild(o);
    });
  });
  function chosen() {
    var want = {};
    selects.forEach(function (s) { if (s.value) { want[s.dataset.filter] = s.value; } });
    return want;
  }
  function fromHash() {
    var said = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var p = kv.split("="); if (p.length === 2) { said[decodeURIComponent(p[0])] = decodeURIComponent(p[1]); }
    });
    selects.forEach(function (sel) { sel.value = said[sel.dataset.filter] || ""; });
    apply(chosen());
  }
  selects.forEach(function (s) {
    s.addEventListener("change", function () {
      var parts = [];
      selects.forEach(function (x) {
        if (x.value) { parts.push(x.dataset.filter + "=" + encodeURIComponent(x.value)); }
      });
      history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
      apply(chosen());
    });
  });
  window.addEventListener("hashchange", fromHash);
  fromHash();
}"""
