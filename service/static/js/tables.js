// Sorting and filtering of model tables, client-side (a run has ~150 models). State lives in the URL query
// (q = name filter, show = tag, sort = column index, dir = asc|desc), so a filtered view is a permalink.
"use strict";

(function () {
  function cellValue(row, index, type) {
    const cell = row.cells[index];
    if (!cell) return null;
    const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
    if (type === "num") {
      const n = parseFloat(raw);
      return Number.isNaN(n) ? null : n;
    }
    return raw.toLowerCase();
  }

  function sortTable(table, index, dir) {
    const th = table.tHead.rows[0].cells[index];
    if (!th) return;
    const type = th.dataset.type || "text";
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    const sign = dir === "desc" ? -1 : 1;
    rows.sort(function (a, b) {
      const va = cellValue(a, index, type);
      const vb = cellValue(b, index, type);
      if (va === null && vb === null) return 0;
      if (va === null) return 1; // missing values last, whichever the direction
      if (vb === null) return -1;
      return (va < vb ? -1 : va > vb ? 1 : 0) * sign;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.from(table.tHead.rows[0].cells).forEach(function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
  }

  function applyFilter(table, bar) {
    const text = bar.querySelector(".filter-text").value.trim().toLowerCase();
    const tag = bar.querySelector(".filter-tag").value;
    let shown = 0;
    const rows = Array.from(table.tBodies[0].rows);
    rows.forEach(function (row) {
      const name = (row.dataset.name || "").toLowerCase();
      const tags = (row.dataset.tags || "").split(" ");
      const visible = (!text || name.includes(text)) && (!tag || tags.includes(tag));
      row.hidden = !visible;
      if (visible) shown += 1;
    });
    bar.querySelector(".filter-count").textContent = shown + " of " + rows.length + " models";
  }

  function saveState(params) {
    const url = new URL(window.location.href);
    Object.keys(params).forEach(function (k) {
      if (params[k]) url.searchParams.set(k, params[k]); else url.searchParams.delete(k);
    });
    window.history.replaceState(null, "", url);
  }

  document.querySelectorAll(".filters[data-table]").forEach(function (bar) {
    const table = document.getElementById(bar.dataset.table);
    if (!table) return;
    const params = new URLSearchParams(window.location.search);
    const textInput = bar.querySelector(".filter-text");
    const tagSelect = bar.querySelector(".filter-tag");
    textInput.value = params.get("q") || "";
    tagSelect.value = params.get("show") || "";
    if (tagSelect.value !== (params.get("show") || "")) tagSelect.value = "";
    const update = function () {
      applyFilter(table, bar);
      saveState({ q: textInput.value.trim(), show: tagSelect.value });
    };
    textInput.addEventListener("input", update);
    tagSelect.addEventListener("change", update);
    applyFilter(table, bar);
  });

  document.querySelectorAll("table.sortable").forEach(function (table) {
    const headers = Array.from(table.tHead.rows[0].cells);
    headers.forEach(function (th, index) {
      th.addEventListener("click", function () {
        const dir = th.getAttribute("aria-sort") === "ascending" ? "desc" : "asc";
        sortTable(table, index, dir);
        saveState({ sort: String(index), dir: dir });
      });
    });
    const params = new URLSearchParams(window.location.search);
    const index = parseInt(params.get("sort"), 10);
    if (!Number.isNaN(index) && index >= 0 && index < headers.length) {
      sortTable(table, index, params.get("dir") === "desc" ? "desc" : "asc");
    }
  });
})();
