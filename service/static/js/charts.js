// Draws the history charts of the Model and Trends pages with the vendored ECharts. The data is embedded in the
// page as JSON (<script type="application/json">), never as executable script; every string put into tooltip HTML
// goes through esc(). Clicking a point opens that night's suite page.
"use strict";

(function () {
  const PALETTE = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#0a3069", "#bf3989", "#4d2d00",
    "#116329", "#6e7781", "#953800", "#218bff"];

  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function fmt(value) {
    return value === null || value === undefined ? "-" : Number(value).toFixed(3);
  }

  function readJson(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  function baseOption(title, nights) {
    return {
      animation: false,
      color: PALETTE,
      title: { text: title, left: 8, top: 4, textStyle: { fontSize: 13, fontWeight: 600 } },
      grid: { left: 56, right: 20, top: 40, bottom: 56 },
      xAxis: { type: "category", data: nights, boundaryGap: false, axisLabel: { fontSize: 10 } },
      yAxis: { type: "value", scale: true, axisLabel: { fontSize: 10 } },
      dataZoom: [{ type: "inside" }, { type: "slider", height: 16, bottom: 8 }],
      tooltip: { trigger: "axis", confine: true },
    };
  }

  const SEVERITY_COLORS = { worse: "#bc4c00", better: "#1a7f37", note: "#8250df", neutral: "#57606a" };

  function drawModel(data) {
    const lines = [];
    // A flaky model can change status every few nights; past MAX_STATUS_LINES the lines would hide the data
    // (the gaps in the line and the events table below still show every change).
    const MAX_STATUS_LINES = 24;
    (data.statusChanges.length <= MAX_STATUS_LINES ? data.statusChanges : []).forEach(function (c) {
      lines.push({ xAxis: c.night, name: c.from + " → " + c.to,
        lineStyle: { color: c.passed ? "#1a7f37" : "#cf222e", type: "solid", width: 2 },
        label: { formatter: c.label, color: c.passed ? "#1a7f37" : "#cf222e" } });
    });
    data.annotations.forEach(function (a) {
      if (!a.night) return;
      lines.push({ xAxis: a.night, name: a.text, lineStyle: { color: "#8250df", type: "dashed" },
        label: { formatter: "note", color: "#8250df" } });
    });
    document.querySelectorAll(".chart[data-metric]").forEach(function (node) {
      const metric = node.dataset.metric;
      const values = data.series[metric];
      if (!values) return;
      const marks = lines.slice();
      data.findings.forEach(function (f) {
        if (f.metric && f.metric !== metric) return; // a change point belongs to one metric's chart
        // the finding's severity and label come with the page's data (perfdash/verdicts.py)
        const color = SEVERITY_COLORS[f.severity] || SEVERITY_COLORS.neutral;
        marks.push({ xAxis: f.night, name: f.text, lineStyle: { color: color, type: "dotted", width: 2 },
          label: { formatter: f.label, color: color, position: "insideEndTop" } });
      });
      const chart = echarts.init(node, null, { renderer: "canvas" });
      const option = baseOption(node.dataset.title, data.nights);
      const band = (data.intervals || {})[metric];
      const hasBand = band && band.low.some(function (v) { return v !== null; });
      option.tooltip.formatter = function (params) {
        const i = params[0].dataIndex;
        const ci = hasBand && band.low[i] !== null ? "<br>95 % CI: " + esc(fmt(band.low[i])) + " – " +
          esc(fmt(band.high[i])) : "";
        const code = (data.codeChanged || [])[i];
        return esc(data.nights[i]) + "<br>" + esc(node.dataset.title) + ": <b>" + esc(fmt(values[i])) + "</b>" + ci +
          "<br>status: " + esc(data.status[i]) + "<br>commit: " + esc((data.commits[i] || "-").slice(0, 12)) +
          (code === true ? "<br>generated code changed" : code === false ? "<br>generated code same" : "");
      };
      // a diamond on each point whose generated code differs from the point before (issue 28)
      const codeMarks = (data.codeChanged || []).map(function (changed, i) {
        return changed === true && values[i] !== null ? { coord: [i, values[i]], name: "code changed" } : null;
      }).filter(function (m) { return m !== null; });
      option.series = [{
        type: "line", name: node.dataset.title, data: values, showSymbol: values.length < 120, symbolSize: 4,
        connectNulls: false, lineStyle: { width: 1.5 },
        markLine: marks.length ? { symbol: "none", silent: false, data: marks, label: { fontSize: 9 } } : undefined,
        markPoint: codeMarks.length ? { symbol: "diamond", symbolSize: 10, data: codeMarks, label: { show: false },
          itemStyle: { color: "#8250df" } } : undefined,
      }];
      if (hasBand) {
        // the confidence interval as a shaded band: the low bound, then the width stacked on it
        option.series.push({ type: "line", name: "95 % CI low", data: band.low, stack: "ci", symbol: "none",
          lineStyle: { opacity: 0 }, silent: true, connectNulls: false });
        option.series.push({ type: "line", name: "95 % CI", stack: "ci", symbol: "none", silent: true,
          connectNulls: false, lineStyle: { opacity: 0 }, areaStyle: { color: "#0969da", opacity: 0.15 },
          data: band.high.map(function (h, i) { return h === null || band.low[i] === null ? null : h - band.low[i]; }) });
      }
      chart.setOption(option);
      chart.on("click", function (p) {
        if (p.componentType === "series" && data.runs[p.dataIndex]) {
          window.location.href = "/suite/" + encodeURIComponent(data.runs[p.dataIndex]);
        }
      });
      window.addEventListener("resize", function () { chart.resize(); });
    });
  }

  function drawTrends(data) {
    document.querySelectorAll(".chart[data-metric]").forEach(function (node) {
      const metric = node.dataset.metric;
      const chart = echarts.init(node, null, { renderer: "canvas" });
      const option = baseOption(node.dataset.title, data.nights);
      option.grid.top = data.lines.length > 1 ? 64 : 40;
      option.legend = { type: "scroll", top: 24, left: 8, right: 8, textStyle: { fontSize: 10 } };
      option.tooltip.formatter = function (params) {
        const i = params[0].dataIndex;
        const rows = params.map(function (p) {
          const line = data.lines[p.seriesIndex];
          return p.marker + esc(line.label) + ": <b>" + esc(fmt(p.value)) + "</b> " +
            esc((line.commits[i] || "").slice(0, 10));
        });
        return esc(data.nights[i]) + "<br>" + rows.join("<br>");
      };
      option.series = data.lines.map(function (line) {
        return { type: "line", name: line.label, data: line[metric], connectNulls: true,
          showSymbol: data.nights.length < 120, symbolSize: 4, lineStyle: { width: 1.5 } };
      });
      chart.setOption(option);
      chart.on("click", function (p) {
        const run = p.componentType === "series" ? data.lines[p.seriesIndex].runs[p.dataIndex] : null;
        if (run) window.location.href = "/suite/" + encodeURIComponent(run);
      });
      window.addEventListener("resize", function () { chart.resize(); });
    });
  }

  const model = readJson("chart-data");
  if (model) drawModel(model);
  const trends = readJson("trend-data");
  if (trends) drawTrends(trends);
})();
