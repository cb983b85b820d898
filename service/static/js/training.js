// The Training page's charts, drawn with the vendored ECharts from the JSON embedded in the page (never inline
// script): per configuration, samples/s eager and compiled by torch version (the publication's bars); per scaling
// experiment, throughput against world size with the ideal lines and the scaling factor on a second axis.
"use strict";

(function () {
  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function rows(params, unit) {
    return params.map(function (p) {
      const value = p.value === null || p.value === undefined ? "-" : Number(p.value).toFixed(1);
      return "<br>" + p.marker + esc(p.seriesName) + ": <b>" + esc(value) + " " + esc(unit(p)) + "</b>";
    }).join("");
  }

  const form = document.getElementById("training-filters");
  if (form) {
    form.querySelectorAll("select, input[type=checkbox]").forEach(function (input) {
      input.addEventListener("change", function () { form.submit(); });
    });
  }
  const dataNode = document.getElementById("training-data");
  if (!dataNode || typeof echarts === "undefined") return;
  const data = JSON.parse(dataNode.textContent);
  const charts = [];

  function title(node) {
    return { text: node.dataset.title, left: 8, top: 4, textStyle: { fontSize: 13, fontWeight: 600 } };
  }

  data.bars.forEach(function (bars) {
    const node = document.getElementById(bars.id);
    if (!node) return;
    const chart = echarts.init(node, null, { renderer: "canvas" });
    chart.setOption({
      animation: false,
      title: title(node),
      legend: { top: 24, left: 8, textStyle: { fontSize: 10 } },
      grid: { left: 64, right: 24, top: 64, bottom: 56 },
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, confine: true, formatter: function (params) {
        return "torch " + esc(bars.versions[params[0].dataIndex]) + rows(params, function () { return "samples/s"; });
      } },
      xAxis: { type: "category", data: bars.versions, axisLabel: { fontSize: 10, rotate: 20 } },
      yAxis: { type: "value", name: "samples/s", axisLabel: { fontSize: 10 } },
      series: [
        { type: "bar", name: "eager", data: bars.eager },
        { type: "bar", name: "compiled", data: bars.compiled },
      ],
    });
    charts.push(chart);
    node.dataset.drawn = "true";
  });

  data.scaling.forEach(function (s) {
    const node = document.getElementById(s.id);
    if (!node) return;
    const sizes = s.world_sizes.map(String);
    const pct = function (values) { return values.map(function (v) { return v === null ? null : v * 100; }); };
    const chart = echarts.init(node, null, { renderer: "canvas" });
    chart.setOption({
      animation: false,
      title: title(node),
      legend: { top: 24, left: 8, textStyle: { fontSize: 10 } },
      grid: { left: 64, right: 64, top: 76, bottom: 40 },
      tooltip: { trigger: "axis", confine: true, formatter: function (params) {
        return "world size " + esc(sizes[params[0].dataIndex]) + rows(params, function (p) {
          return p.seriesName.indexOf("scaling") >= 0 ? "%" : "samples/s";
        });
      } },
      xAxis: { type: "category", name: "devices", nameLocation: "middle", nameGap: 26, data: sizes },
      yAxis: [
        { type: "value", name: "samples/s", axisLabel: { fontSize: 10 } },
        { type: "value", name: "scaling %", min: 0, max: 110, axisLabel: { fontSize: 10 } },
      ],
      series: [
        { type: "bar", name: "eager", data: s.eager },
        { type: "bar", name: "compiled", data: s.compiled },
        { type: "line", name: "ideal (eager)", data: s.eager_ideal, lineStyle: { type: "dashed" }, symbol: "none" },
        { type: "line", name: "ideal (compiled)", data: s.compiled_ideal, lineStyle: { type: "dashed" },
          symbol: "none" },
        { type: "line", name: "eager scaling", yAxisIndex: 1, data: pct(s.eager_scaling) },
        { type: "line", name: "compiled scaling", yAxisIndex: 1, data: pct(s.compiled_scaling) },
      ],
    });
    charts.push(chart);
    node.dataset.drawn = "true";
  });

  window.addEventListener("resize", function () { charts.forEach(function (c) { c.resize(); }); });
})();
