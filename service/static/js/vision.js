// The Vision page's charts, drawn with the vendored ECharts from the JSON embedded in the page (never inline
// script): per table a duration bar chart (no compile vs compile) and an improvement % bar chart, and the compiled
// latency of each model over nights. Changing the compile mode or statistic reloads the page with the new choice.
"use strict";

(function () {
  const NO_COMPILE = "#8c959f";
  const COMPILE = "#0969da";

  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function fmt(value, digits) {
    return value === null || value === undefined ? "-" : Number(value).toFixed(digits);
  }

  function bars(node, data) {
    // Room for every model's bars: the publication's twelve rows need more height than a two-row test run.
    node.style.height = Math.max(280, 90 + data.labels.length * 34) + "px";
    const chart = echarts.init(node, null, { renderer: "canvas" });
    const improvement = node.dataset.kind === "improvement";
    const option = {
      animation: false,
      title: { text: node.dataset.title, left: 8, top: 4, textStyle: { fontSize: 13, fontWeight: 600 } },
      grid: { left: 130, right: 24, top: improvement ? 36 : 56, bottom: 24 },
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, confine: true },
      // Categories top to bottom in the table's (the publication's) order.
      yAxis: { type: "category", data: data.labels, inverse: true, axisLabel: { fontSize: 10 } },
      xAxis: { type: "value", axisLabel: { fontSize: 10 } },
    };
    if (improvement) {
      option.tooltip.formatter = function (params) {
        return esc(params[0].name) + ": <b>" + esc(fmt(params[0].value, 1)) + " %</b>";
      };
      option.series = [{ type: "bar", name: "improvement %", data: data.improvement.map(function (v) {
        return { value: v, itemStyle: { color: v !== null && v < 0 ? "#cf222e" : "#1a7f37" } };
      }) }];
    } else {
      option.legend = { top: 24, left: 8, textStyle: { fontSize: 10 } };
      option.tooltip.formatter = function (params) {
        return esc(params[0].name) + params.map(function (p) {
          return "<br>" + p.marker + esc(p.seriesName) + ": <b>" + esc(fmt(p.value, 2)) + " ms</b>";
        }).join("");
      };
      option.series = [
        { type: "bar", name: "no compile", data: data.eager, itemStyle: { color: NO_COMPILE } },
        { type: "bar", name: "compile", data: data.compiled, itemStyle: { color: COMPILE } },
      ];
    }
    chart.setOption(option);
    window.addEventListener("resize", function () { chart.resize(); });
  }

  function trend(node, data) {
    const chart = echarts.init(node, null, { renderer: "canvas" });
    chart.setOption({
      animation: false,
      title: { text: node.dataset.title, left: 8, top: 4, textStyle: { fontSize: 13, fontWeight: 600 } },
      legend: { type: "scroll", top: 24, left: 8, right: 8, textStyle: { fontSize: 10 } },
      grid: { left: 56, right: 20, top: 60, bottom: 40 },
      tooltip: { trigger: "axis", confine: true, formatter: function (params) {
        return esc(data.nights[params[0].dataIndex]) + params.map(function (p) {
          return "<br>" + p.marker + esc(p.seriesName) + ": <b>" + esc(fmt(p.value, 2)) + " ms</b>";
        }).join("");
      } },
      xAxis: { type: "category", data: data.nights, boundaryGap: false, axisLabel: { fontSize: 10 } },
      yAxis: { type: "value", scale: true, axisLabel: { fontSize: 10 } },
      series: data.lines.map(function (line) {
        return { type: "line", name: line.label, data: line.values, connectNulls: false,
          showSymbol: data.nights.length < 120, symbolSize: 5, lineStyle: { width: 1.5 } };
      }),
    });
    chart.on("click", function (p) {
      const run = p.componentType === "series" ? data.runs[p.dataIndex] : null;
      if (run) window.location.href = "/suite/" + encodeURIComponent(run);
    });
    window.addEventListener("resize", function () { chart.resize(); });
  }

  const form = document.getElementById("vision-filters");
  if (form) {
    ["compile-mode", "stat"].forEach(function (id) {
      const select = document.getElementById(id);
      if (select) select.addEventListener("change", function () { form.submit(); });
    });
  }
  const node = document.getElementById("vision-data");
  if (!node || typeof echarts === "undefined") return;
  const charts = JSON.parse(node.textContent);
  const byId = function (list) {
    const out = {};
    list.forEach(function (item) { out[item.id] = item; });
    return out;
  };
  const barData = byId(charts.bars);
  const trendData = byId(charts.trends);
  document.querySelectorAll(".chart[data-chart]").forEach(function (chartNode) {
    const key = chartNode.dataset.chart;
    if (chartNode.dataset.kind === "trend") {
      if (trendData[key]) trend(chartNode, trendData[key]);
    } else if (barData[key]) {
      bars(chartNode, barData[key]);
    }
    chartNode.dataset.drawn = "true";
  });
})();
