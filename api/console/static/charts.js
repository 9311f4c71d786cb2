/* Line charts as inline SVG, drawn here (no chart library): time on x, one y axis, a legend,
 * a readout that follows the pointer or the arrow keys, and the same figures as a table for
 * screen readers and copying. */
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function niceTicks(max, count) {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw);
  const ticks = [];
  for (let v = 0; v <= max + step / 2; v += step) ticks.push(v);
  if (ticks[ticks.length - 1] < max) ticks.push(ticks[ticks.length - 1] + step);
  return ticks;
}

/* Round steps for time ticks, in ms: seconds, minutes, hours, days. */
const TIME_STEPS = [
  ...[1, 2, 5, 10, 15, 30].map((n) => n * 1e3),
  ...[1, 2, 5, 10, 15, 30].map((n) => n * 60e3),
  ...[1, 2, 3, 6, 12].map((n) => n * 3600e3),
  ...[1, 2, 7, 14, 30, 90, 365].map((n) => n * 86400e3),
];

/* The x-axis ticks of [t0, t1] (ms since the epoch), as [ms, label]: at most `max`, at a
 * round step (UTC), each label distinct and as precise as the step needs: seconds when the
 * step is under a minute, the date when it is a day or more or the ticks span two days. */
function timeTicks(t0, t1, max = 6) {
  const span = Math.max(t1 - t0, 1);
  const step = TIME_STEPS.find((s) => span / s <= max - 1) ||
    TIME_STEPS[TIME_STEPS.length - 1] * Math.ceil(span / ((max - 1) * 365 * 86400e3));
  const ticks = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ticks.push(t);
  const day = (t) => new Date(t).toISOString().slice(0, 10);
  const dated = step < 86400e3 && new Set(ticks.map(day)).size > 1;
  return ticks.map((t) => {
    const iso = new Date(t).toISOString();
    if (step >= 86400e3) return [t, iso.slice(0, 10)];
    const clock = step < 60e3 ? iso.slice(11, 19) : iso.slice(11, 16);
    return [t, dated ? iso.slice(5, 10) + " " + clock : clock];
  });
}

/* lineChart("Rate vs limit", [{name, cls, points: [[Date, number|null], ...]}], {unit}) */
function lineChart(title, series, opts = {}) {
  const W = 720, H = 260, L = 56, R = 12, T = 12, B = 32;
  const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null && p[1] !== undefined));
  const figure = h("figure.chart");
  figure.append(h("figcaption", null, title));
  if (!all.length) {
    figure.append(h("p.empty", null, "No data in this range."));
    return figure;
  }
  const times = all.map((p) => p[0].getTime());
  let t0 = Math.min(...times), t1 = Math.max(...times);
  if (t0 === t1) { t0 -= 60e3; t1 += 60e3; }
  const ticks = niceTicks(Math.max(...all.map((p) => p[1])), 4);
  const yMax = ticks[ticks.length - 1] || 1;
  const x = (t) => L + (t - t0) / (t1 - t0) * (W - L - R);
  const y = (v) => T + (1 - v / yMax) * (H - T - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title,
    class: "chart-svg", preserveAspectRatio: "xMidYMid meet" });
  root.append(svg("title", null, title));
  for (const v of ticks) {
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    root.append(svg("text", { x: L - 6, y: y(v) + 4, class: "tick", "text-anchor": "end" },
      Fmt.rate(v)));
  }
  for (const [t, label] of timeTicks(t0, t1)) {
    const at = x(t);
    root.append(svg("line", { x1: at, x2: at, y1: H - B, y2: H - B + 4, class: "axis" }));
    root.append(svg("text", { x: at, y: H - 10, class: "tick x-tick",
      "text-anchor": at < L + 40 ? "start" : at > W - R - 40 ? "end" : "middle" }, label));
  }
  root.append(svg("text", { x: L - 6, y: H - 10, class: "tick", "text-anchor": "end" }, "UTC"));
  root.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  root.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  series.forEach((s, i) => {
    const pts = s.points.filter((p) => p[1] !== null && p[1] !== undefined);
    const cls = "series s" + i + (s.dashed ? " dashed" : "");
    if (pts.length > 1) {
      const d = pts.map((p, j) => (j ? "L" : "M") + x(p[0].getTime()).toFixed(1) + " " +
        y(p[1]).toFixed(1)).join(" ");
      root.append(svg("path", { d, class: cls }));
    }
    for (const p of pts) {
      root.append(svg("circle", { cx: x(p[0].getTime()), cy: y(p[1]), r: 2.5,
        class: "dot s" + i }));
    }
  });
  const cursor = svg("line", { x1: -10, x2: -10, y1: T, y2: H - B, class: "cursor" });
  root.append(cursor);
  figure.append(root);
  figure.append(h("ul.legend", null, series.map((s, i) =>
    h("li", null, h("span.swatch.s" + i + (s.dashed ? ".dashed" : ""), { "aria-hidden": "true" }),
      s.name + (opts.unit ? " (" + opts.unit + ")" : "")))));
  // The readout: nearest time under the pointer, or stepped with the arrow keys.
  const stamps = [...new Set(times)].sort((a, b) => a - b);
  const readout = h("p.readout", { "aria-live": "polite" },
    "Point at the chart, or focus it and use the arrow keys, to read values.");
  let index = stamps.length - 1;
  const show = (i) => {
    index = Math.max(0, Math.min(stamps.length - 1, i));
    const t = stamps[index];
    cursor.setAttribute("x1", x(t)); cursor.setAttribute("x2", x(t));
    const values = series.map((s) => {
      const p = s.points.find((q) => q[0].getTime() === t);
      return s.name + " " + (p && p[1] !== null ? Fmt.rate(p[1]) : "—");
    });
    readout.textContent = Fmt.time(new Date(t).toISOString()) + ": " + values.join(", ");
  };
  root.setAttribute("tabindex", "0");
  root.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowLeft") { show(index - 1); ev.preventDefault(); }
    if (ev.key === "ArrowRight") { show(index + 1); ev.preventDefault(); }
  });
  root.addEventListener("focus", () => show(index));
  root.addEventListener("pointermove", (ev) => {
    const box = root.getBoundingClientRect();
    const t = t0 + ((ev.clientX - box.left) / box.width * W - L) / (W - L - R) * (t1 - t0);
    let best = 0;
    stamps.forEach((s, i) => { if (Math.abs(s - t) < Math.abs(stamps[best] - t)) best = i; });
    show(best);
  });
  figure.append(readout);
  const rows = stamps.map((t) => [{ th: Fmt.time(new Date(t).toISOString()) },
    ...series.map((s) => {
      const p = s.points.find((q) => q[0].getTime() === t);
      return p && p[1] !== null ? Fmt.rate(p[1]) : "—";
    })]);
  figure.append(h("details", null, h("summary", null, "The figures as a table"),
    table(title, ["Window start", ...series.map((s) => s.name)], rows)));
  return figure;
}
