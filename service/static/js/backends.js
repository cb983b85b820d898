// The Backends page's chart (the publication's): one model's latency per backend across batch sizes, drawn with the
// vendored ECharts from the JSON embedded in the page (never inline script). Changing a filter reloads the page.
"use strict";

(function () {
  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function fmt(value) {
    return value === null || value === undefined ? "failed / not run" : Number(value).toFixed(2) + " ms";
  }

  const form = document.getElementById("backend-filters");
  if (form) {
    form.querySelectorAll("select").forEach(function (select) {
      select.addEventListener("change", function () { form.submit(); });
    });
  }
  const node = document.getElementById("backends-chart");
  const dataNode = document.getElementById("backends-data");
  if (!node || !dataNode || typeof echarts === "undefined") return;
  const data = JSON.parse(dataNode.textContent);
  const chart = echarts.init(node, null, { renderer: "canvas" });
  chart.setOption({
    animation: false,
    title: { text: node.dataset.title, left: 8, top: 4, textStyle: { fontSize: 13, fontWeight: 600 } },
    legend: { top: 24, left: 8, textStyle: { fontSize: 10 } },
    grid: { left: 64, right: 24, top: 76, bottom: 40 },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, confine: true, formatter: function (params) {
      return "batch size " + esc(data.batch_sizes[params[0].dataIndex]) + params.map(function (p) {
        return "<br>" + p.marker + esc(p.seriesName) + ": <b>" + esc(fmt(p.value)) + "</b>";
      }).join("");
    } },
    xAxis: { type: "category", name: "batch size", nameLocation: "middle", nameGap: 26,
      data: data.batch_sizes.map(String), axisLabel: { fontSize: 10 } },
    yAxis: { type: "value", name: "ms", axisLabel: { fontSize: 10 } },
    series: data.lines.map(function (line) {
      return { type: "bar", name: line.label, data: line.values };
    }),
  });
  window.addEventListener("resize", function () { chart.resize(); });
  node.dataset.drawn = "true";
})();
