// SensorWatch dashboard: polls the JSON endpoints and draws tables and uPlot charts.
// No build step: plain browser JavaScript, uPlot vendored under /static/vendor.
"use strict";

const COLORS = {
  critical: "#d62828", warning: "#e88f00", avg: "#2563eb", band: "#93c5fd",
  normal: "#0d9488", normalFill: "rgba(13, 148, 136, 0.12)",
};
const QUERY_COLORS = ["#2563eb", "#16a34a", "#9333ea", "#d97706", "#0891b2", "#be123c"];
const SILENCE_HOURS = [1, 4, 24];
const charts = {};
let config = null;
let selectedSensor = null;
let refreshes = 0;
let refreshesStarted = 0;
let newestRendered = 0;
// Alerts of the real-time path (/api/alerts/live) the lake has no row for yet, by alert_id;
// and the newest lake results, which they are drawn into.
const live = new Map();
let lastAlerts = null;
let lastIncidents = null;

const $ = (id) => document.getElementById(id);

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function utc(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "").replace("Z", "") : "–";
}

function utcDate(ts) {
  return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
}

// Time axis labels in UTC, 24-hour: "HH:MM", with the date or seconds where the span needs.
function timeLabels(u, splits) {
  const span = splits.length > 1 ? splits[splits.length - 1] - splits[0] : 0;
  return splits.map((ts) => {
    const iso = new Date(ts * 1e3).toISOString();
    if (span > 86400) return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
    return span < 600 ? iso.slice(11, 19) : iso.slice(11, 16);
  });
}

// A span of hours as the page names it: "24 h", "1.5 h".
function hoursText(hours) {
  return `${Number(hours)} h`;
}

function number(value, digits = 1) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.abs(seconds);
  if (s < 120) return `${seconds.toFixed(1)} s`;
  if (s < 7200) return `${(seconds / 60).toFixed(1)} min`;
  if (s < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

// An incident's length as the terminal view writes it: 45s, 3m20s, 1h10m, 3d4h.
function span(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const whole = Math.floor(seconds);
  const [d, h, m, s] = [Math.floor(whole / 86400), Math.floor(whole / 3600) % 24, Math.floor(whole / 60) % 60, whole % 60];
  if (d) return `${d}d${h}h`;
  if (h) return `${h}h${String(m).padStart(2, "0")}m`;
  if (m) return s ? `${m}m${String(s).padStart(2, "0")}s` : `${m}m`;
  return `${s}s`;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function showEmpty(id, message) {
  const el = $(id);
  el.hidden = !message;
  el.textContent = message || "";
}

// One chart per container: created on first data, then only fed new data.
function draw(id, series, data, extra = {}) {
  const target = $(id);
  const points = data.length > 1 ? data[1].filter((v) => v !== null).length : 0;
  target.dataset.points = String(points);
  const width = Math.max(300, target.clientWidth);
  const height = target.classList.contains("small") ? 180 : 260;
  const key = id + ":" + series.map((s) => s.label).join("|");
  if (charts[id] && charts[id].key !== key) {
    charts[id].plot.destroy();
    delete charts[id];
  }
  if (!charts[id]) {
    const opts = {
      width, height, tzDate: utcDate,
      series: [{ value: (u, v) => (v === null ? "–" : utc(new Date(v * 1e3).toISOString())) }, ...series],
      scales: { x: { time: true } },
      axes: [{ values: timeLabels }, {}],
      legend: { live: true },
      ...extra,
    };
    charts[id] = { key, plot: new uPlot(opts, data, target) };
  } else {
    charts[id].plot.setData(data);
    if (Math.abs(charts[id].plot.width - width) > 4) charts[id].plot.setSize({ width, height });
  }
}

function renderSummary(summary) {
  $("open-critical").textContent = summary.open.critical;
  $("open-warning").textContent = summary.open.warning;
  $("total-alerts").textContent = summary.total.critical + summary.total.warning;
  $("total-label").textContent = `alerts, last ${hoursText(summary.total_hours)}`;
  $("newest").textContent = utc(summary.newest_detected_at);
  $("open-note").textContent = summary.exists
    ? `open incidents = firing now; recent alerts = detected in the last ${summary.open_minutes} minutes; ` +
      `alerts = detected in the last ${hoursText(summary.total_hours)}`
    : "No alerts table yet: the streaming job creates it when it starts.";
}

// "2 critical · 1 warning": the non-zero counts of a breakdown, in its order.
function breakdown(counts) {
  const parts = Object.entries(counts).filter(([, n]) => n > 0).map(([k, n]) => `${n} ${k}`);
  return parts.join(" · ");
}

// A value with its rule's unit, from the rules file (/api/config); the first three rules'
// units for a rule it no longer has.
function measure(rule, value) {
  if (value === null || value === undefined) return "–";
  const unit = (config && config.units && rule in config.units)
    ? config.units[rule] : (rule === "sensor_silent" ? "s" : "°C");
  if (unit === "s") return `${number(value, 0)} s`;
  // A rate rule's change per minute is small: 0.15 °C/min would show as 0.1.
  const digits = unit && unit.endsWith("/min") ? 2 : 1;
  return unit ? `${number(value, digits)} ${unit}` : number(value, digits);
}

// The incidents live alerts open before the lake has them: one per sensor and rule that
// has no firing incident in the lake yet.
function liveIncidents(result) {
  const firing = new Set(result.incidents.filter((i) => i.status === "firing").map((i) => `${i.sensor_id}|${i.rule}`));
  const opened = new Map();
  for (const alert of live.values()) {
    const key = `${alert.sensor_id}|${alert.rule}`;
    if (firing.has(key)) continue;
    const seen = opened.get(key);
    if (!seen) {
      opened.set(key, { ...alert, status: "firing", live: true, started_at: alert.window_start, peak_value: alert.observed_value, alert_count: 1 });
      continue;
    }
    if (alert.window_start < seen.started_at) seen.started_at = alert.window_start;
    seen.peak_value = Math.max(seen.peak_value, alert.observed_value);
    seen.alert_count += 1;
  }
  for (const incident of opened.values()) {
    incident.duration_seconds = Math.max(0, (Date.now() - Date.parse(incident.started_at)) / 1000);
  }
  return [...opened.values()];
}

function renderIncidents(result) {
  lastIncidents = result;
  const early = liveIncidents(result);
  const bySeverity = { ...result.open.by_severity };
  const byRule = { ...result.open.by_rule };
  for (const incident of early) {
    bySeverity[incident.severity] = (bySeverity[incident.severity] || 0) + 1;
    byRule[incident.rule] = (byRule[incident.rule] || 0) + 1;
  }
  const open = result.open.total + early.length;
  $("open-incidents").textContent = String(open);
  $("open-card").classList.toggle("firing", open > 0);
  $("open-by-severity").textContent = open ? breakdown(bySeverity) : "none firing";
  $("open-by-rule").textContent = breakdown(byRule);
  const body = $("incidents-table").querySelector("tbody");
  body.replaceChildren();
  for (const incident of [...early, ...result.incidents]) {
    const row = document.createElement("tr");
    row.className = `incident-row ${incident.status}`;
    row.dataset.incidentId = incident.incident_id;
    for (const [text, kind] of [[incident.status, incident.status], [incident.severity, incident.severity]]) {
      const badge = document.createElement("span");
      badge.className = `badge ${kind}`;
      badge.textContent = text;
      cell(row, "").appendChild(badge);
    }
    if (incident.live) liveBadge(row.firstChild);
    cell(row, incident.rule);
    cell(row, incident.sensor_id);
    cell(row, incident.site || "–");
    cell(row, utc(incident.started_at));
    cell(row, span(incident.duration_seconds), "num");
    cell(row, measure(incident.rule, incident.peak_value), "num");
    cell(row, measure(incident.rule, incident.threshold), "num");
    cell(row, String(incident.alert_count), "num");
    row.classList.toggle("silenced", Boolean(incident.silenced));
    if (incident.live) {
      row.classList.add("live");
      row.dataset.incidentId = "";
      row.dataset.liveAlertId = incident.alert_id;
      cell(row, "in the lake with the next micro-batch", "muted");
    } else {
      silenceCell(row, incident);
    }
    row.addEventListener("click", () => selectSensor(incident.sensor_id));
    body.appendChild(row);
  }
  $("silence-note").textContent = result.incidents.length && !result.silences_known
    ? "silence state unknown: Alertmanager does not answer the dashboard"
    : "";
  $("silence-note").title = result.silences_error || "";
  const shown = result.incidents.length;
  const resolvedSince = utc(result.resolved_since);
  $("incidents-count").textContent = result.exists
    ? `(${open} firing, ${result.resolved} resolved since ${resolvedSince} UTC` +
      (shown < result.total ? `; first ${shown} shown)` : ")")
    : "";
  showEmpty("incidents-empty", !result.exists
    ? "No incidents table yet: the streaming job creates it when it starts."
    : (shown === 0 ? "No incidents firing, none resolved recently." : ""));
}

// When a silence ends: "until 14:05 UTC" today (UTC), "until 11-24 14:05 UTC" later.
function until(iso) {
  if (!iso) return "";
  const text = utc(iso);
  const today = new Date().toISOString().slice(0, 10);
  return `until ${text.startsWith(today) ? text.slice(11, 16) : text.slice(5, 16)} UTC`;
}

// The silence column: the silence in effect, or buttons that silence a firing incident
// through the dashboard (POST /api/silences); and Alertmanager's own new-silence form.
function silenceCell(row, incident) {
  const td = cell(row, "", "silence-cell");
  td.addEventListener("click", (event) => event.stopPropagation());
  const silenced = incident.silenced;
  if (silenced) {
    const badge = document.createElement("span");
    badge.className = "badge silenced";
    badge.textContent = `silenced ${until(silenced.ends_at)}`;
    badge.title = `silence ${silenced.id} by ${silenced.created_by || "?"}: ${silenced.comment || ""}`;
    td.appendChild(badge);
  } else if (incident.status === "firing") {
    const buttons = SILENCE_HOURS.map((hours) => {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "silence-action";
      button.dataset.hours = String(hours);
      button.textContent = `${hours} h`;
      button.title = `silence ${incident.rule} on ${incident.sensor_id} for ${hours} h (in Alertmanager, via the dashboard)`;
      return button;
    });
    const label = document.createElement("span");
    label.className = "muted";
    label.textContent = "silence";
    td.append(label, ...buttons);
    for (const button of buttons) {
      button.addEventListener("click", () => silence(incident, Number(button.dataset.hours), buttons));
    }
  }
  const link = document.createElement("a");
  link.className = "silence";
  link.href = incident.silence_url;
  link.target = "_blank";
  link.rel = "noopener";
  link.textContent = "AM UI ↗";
  link.title = `Alertmanager's new-silence form for ${incident.rule} on ${incident.sensor_id} ` +
    "(needs Alertmanager's web UI: Docker's prom/alertmanager has it, Debian's package does not)";
  td.appendChild(link);
}

function silenceMessage(text, isError = false) {
  const el = $("silence-message");
  el.hidden = !text;
  el.textContent = text;
  el.classList.toggle("error", isError);
}

async function silence(incident, hours, buttons) {
  const what = `${incident.rule} on ${incident.sensor_id}`;
  for (const button of buttons) button.disabled = true;
  silenceMessage(`silencing ${what} for ${hours} h…`);
  try {
    const response = await fetch("/api/silences", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ sensor_id: incident.sensor_id, rule: incident.rule, hours }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    silenceMessage(`silenced ${what} for ${hours} h (Alertmanager silence ${body.silence_id})`);
    await refresh();
  } catch (error) {
    silenceMessage(`could not silence ${what}: ${error.message}`, true);
    for (const button of buttons) button.disabled = false;
  }
}

// "live": an alert from the real-time path (Kafka) that the lake has no row for yet.
function liveBadge(td) {
  const badge = document.createElement("span");
  badge.className = "badge live";
  badge.textContent = "live";
  badge.title = "from the real-time path (Kafka sensor-alerts), seconds before the lake has it";
  td.appendChild(badge);
}

function renderAlerts(result) {
  lastAlerts = result;
  // A live alert leaves once the lake has its row, or once it is older than the page's range.
  for (const alert of result.alerts) live.delete(alert.alert_id);
  for (const [id, alert] of live) if (result.since && alert.detected_at < result.since) live.delete(id);
  const early = [...live.values()].sort((a, b) => Date.parse(b.detected_at) - Date.parse(a.detected_at));
  const body = $("alerts-table").querySelector("tbody");
  body.replaceChildren();
  for (const alert of [...early, ...result.alerts]) {
    const row = document.createElement("tr");
    row.className = `alert-row ${alert.severity}` + (alert.live ? " live" : "");
    row.dataset.alertId = alert.alert_id;
    const detected = cell(row, utc(alert.detected_at));
    if (alert.live) liveBadge(detected);
    const badge = document.createElement("span");
    badge.className = `badge ${alert.severity}`;
    badge.textContent = alert.severity;
    cell(row, "").appendChild(badge);
    cell(row, alert.rule);
    cell(row, alert.sensor_id);
    cell(row, alert.site || "–");
    cell(row, utc(alert.window_start));
    // In the rule's unit (°C, %, °C/min), as the incidents show theirs.
    const observed = alert.rule === "sensor_silent"
      ? `${number(alert.observed_value, 0)} s silent`
      : measure(alert.rule, alert.observed_value);
    cell(row, observed, "num");
    cell(row, measure(alert.rule, alert.threshold), "num");
    cell(row, String(alert.readings), "num");
    row.addEventListener("click", () => selectSensor(alert.sensor_id));
    body.appendChild(row);
  }
  const shown = result.alerts.length;
  const since = `detected since ${utc(result.since)} UTC`;
  const liveText = early.length ? `${early.length} live, not in the lake yet` : "";
  const more = liveText ? `; ${liveText}` : "";
  $("alerts-count").textContent = result.exists
    ? (shown < result.total ? `(newest ${shown} of ${result.total} ${since}${more})` : `(${shown} ${since}${more})`)
    : (liveText ? `(${liveText})` : "");
  showEmpty("alerts-empty", early.length ? "" : !result.exists
    ? "No alerts table yet: the streaming job creates it when it starts."
    : (shown === 0 ? `No alerts ${since}.` : ""));
}

// The real-time path's alerts, pushed by the server as they arrive (Server-Sent Events):
// drawn at once into the alerts and incidents tables, until the lake has them.
function followLive() {
  if (!config.live_alerts) return;
  const state = (text) => { $("live").textContent = text; $("live").hidden = false; };
  const add = (alert) => { live.set(alert.alert_id, { ...alert, live: true }); };
  const redraw = () => {
    if (lastAlerts) renderAlerts(lastAlerts);
    if (lastIncidents) renderIncidents(lastIncidents);
    document.body.dataset.liveAlerts = String(live.size);
  };
  const source = new EventSource("/api/alerts/live");
  source.addEventListener("hello", (event) => {
    const hello = JSON.parse(event.data);
    // Kept alerts the lake already has leave again at the redraw.
    for (const alert of hello.alerts) if (!live.has(alert.alert_id)) add(alert);
    state(`live: ${hello.topic}`);
    redraw();
  });
  source.addEventListener("alert", (event) => {
    add(JSON.parse(event.data));
    redraw();
  });
  source.addEventListener("error", () => state("live: reconnecting…"));
}

function renderTimeline(timeline) {
  const bars = (align) => uPlot.paths.bars({ size: [0.45, 40], align });
  draw("timeline", [
    { label: "critical", stroke: COLORS.critical, fill: COLORS.critical + "cc", paths: bars(-1), points: { show: false } },
    { label: "warning", stroke: COLORS.warning, fill: COLORS.warning + "cc", paths: bars(1), points: { show: false } },
  ], [timeline.t, timeline.critical, timeline.warning], { scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(1, hi)] } } });
  const minutes = timeline.bucket_seconds / 60;
  $("timeline-range").textContent = "(by event time of the alert window" +
    (timeline.since ? `, the last ${hoursText(timeline.hours)} of alerts from ${utc(timeline.since)} UTC)` : ")");
  showEmpty("timeline-empty", !timeline.exists
    ? "No alerts table yet."
    : (timeline.t.length === 0 ? "No alerts." : `bars of ${minutes} minute${minutes === 1 ? "" : "s"}`));
}

function renderSensors(list) {
  const select = $("sensor");
  const ids = list.sensors.map((s) => s.sensor_id);
  if (!selectedSensor || !ids.includes(selectedSensor)) selectedSensor = ids[0] || null;
  const current = Array.from(select.options).map((o) => o.value).join(",");
  if (current !== ids.join(",")) {
    select.replaceChildren(...list.sensors.map((s) => {
      const option = document.createElement("option");
      option.value = s.sensor_id;
      option.textContent = s.alerts ? `${s.sensor_id} (${s.alerts} alerts)` : s.sensor_id;
      option.title = `sensors with 1-minute statistics in the last ${hoursText(list.hours)} of them; ` +
        `alerts of that range`;
      return option;
    }));
  }
  if (selectedSensor) select.value = selectedSensor;
  return list;
}

async function refreshTemperature(list) {
  if (!selectedSensor) {
    draw("temperature", [{ label: "avg °C" }], [[], []]);
    showEmpty("temperature-empty", list && !list.exists
      ? "No sensor_stats_1m table yet: the streaming job creates it when it starts."
      : "No 1-minute statistics yet (windows are written when the watermark closes them).");
    $("thresholds").textContent = "";
    return;
  }
  const stats = await getJson(`/api/sensors/${encodeURIComponent(selectedSensor)}/stats`);
  const flat = (value) => stats.t.map(() => value);
  const th = stats.thresholds;
  const series = [
    { label: "avg °C", stroke: COLORS.avg, width: 2 },
    { label: "min °C", stroke: COLORS.band, width: 1 },
    { label: "max °C", stroke: COLORS.band, width: 1 },
    { label: "critical", stroke: COLORS.critical, dash: [6, 4], width: 1.5, points: { show: false } },
    { label: "warning", stroke: COLORS.warning, dash: [6, 4], width: 1.5, points: { show: false } },
  ];
  const data = [stats.t, stats.avg, stats.min, stats.max, flat(th.critical), flat(th.warning)];
  // The sensor's own normal (a deviation rule's newest baseline), filled between its edges;
  // drawn first, so that the readings' lines lie on top of its fill.
  const normal = (stats.baselines || []).find((b) => b.mean !== null);
  let extra = {};
  if (normal) {
    const edge = { stroke: COLORS.normal, width: 1.5, points: { show: false } };
    series.unshift({ ...edge, label: `normal high (${normal.rule})` }, { ...edge, label: "normal low" });
    data.splice(1, 0, flat(normal.high), flat(normal.low));
    extra = { bands: [{ series: [1, 2], fill: COLORS.normalFill }] };
  }
  draw("temperature", series, data, extra);
  showEmpty("temperature-empty", stats.t.length ? "" : "No statistics for this sensor yet.");
  $("thresholds").textContent =
    (th.critical === null ? "no critical rule for this sensor, " :
      `critical ${number(th.critical)} °C (${th.critical_source}), `) +
    (th.warning === null ? "no warning rule" : `warning ${number(th.warning)} °C (window average)`) +
    (stats.baselines || []).map(normalText).join("");
}

// A deviation rule's band in words: its edges, what they are made of, how far it learned.
function normalText(b) {
  if (b.mean === null) return `; ${b.rule}: no baseline learned yet`;
  const sd = Math.max(b.sd, b.min_sd);
  return `; normal band (${b.rule}): ${number(b.low)} to ${number(b.high)} °C ` +
    `(mean ${number(b.mean)} ± ${b.deviations} × ${number(sd, 2)}), ` +
    `learned to ${utc(b.last_pane)}` + (b.warm ? "" : ", still warming up: it fires once warm");
}

function selectSensor(sensorId) {
  if (!Array.from($("sensor").options).some((o) => o.value === sensorId)) return;
  selectedSensor = sensorId;
  $("sensor").value = sensorId;
  refreshTemperature().catch(showError);
}

function renderPipeline(result) {
  const body = $("pipeline-table").querySelector("tbody");
  body.replaceChildren();
  for (const q of result.queries) {
    const row = document.createElement("tr");
    cell(row, q.query);
    cell(row, String(q.batch_id), "num");
    cell(row, utc(q.timestamp));
    cell(row, number(q.input_rows_per_second), "num");
    cell(row, number(q.processed_rows_per_second), "num");
    cell(row, `${number(q.batch_duration_ms / 1000, 1)} s`, "num");
    cell(row, utc(q.watermark));
    cell(row, duration(q.watermark_lag_seconds), "num");
    cell(row, String(q.rows_dropped_by_watermark), "num");
    cell(row, String(q.state_rows), "num");
    body.appendChild(row);
  }
  $("pipeline-range").textContent = result.since
    ? `(batches of the last ${number(result.minutes, 0)} minutes up to the newest, from ${utc(result.since)} UTC)`
    : "";
  showEmpty("pipeline-empty", !result.exists
    ? "No pipeline_metrics table yet: the streaming job creates it when it starts."
    : (result.queries.length === 0 ? "No micro-batches recorded yet." : ""));
  // All queries on one time axis: each query's points at its own batch times.
  const names = Object.keys(result.series).sort();
  const times = [...new Set(names.flatMap((n) => result.series[n].t))].sort((a, b) => a - b);
  const column = (name, key, scale = 1) => {
    const byTime = new Map(result.series[name].t.map((t, i) => [t, result.series[name][key][i]]));
    return times.map((t) => (byTime.has(t) && byTime.get(t) !== null ? byTime.get(t) / scale : null));
  };
  const lines = names.map((n, i) => ({ label: n, stroke: QUERY_COLORS[i % QUERY_COLORS.length], spanGaps: true }));
  draw("pipeline-rate", lines, [times, ...names.map((n) => column(n, "processed_rows_per_second"))]);
  draw("pipeline-duration", lines, [times, ...names.map((n) => column(n, "batch_duration_ms", 1000))]);
}

// The pipeline as Prometheus saw it over the last hour, or the line that says why not.
function renderPrometheus(result) {
  const missing = result.error
    ? `No pipeline view from Prometheus: ${result.error}. scripts/run-local and docker compose start one; ` +
      "or point the dashboard at yours with --prometheus-url."
    : "";
  showEmpty("prometheus-empty", missing);
  $("prometheus-charts").hidden = Boolean(result.error);
  renderBridge(result.error ? null : result.bridge);
  if (result.error) return;
  for (const [name, chart] of Object.entries(result.charts)) {
    const names = Object.keys(chart.lines);
    const lines = names.map((n, i) => ({ label: n, stroke: QUERY_COLORS[i % QUERY_COLORS.length], spanGaps: true }));
    draw(`prom-${name}`, lines, [chart.t, ...names.map((n) => chart.lines[n])]);
  }
}

// A badge saying yes (green) or no (red) in words; "–" when not known.
function flag(row, value, yes, no) {
  const td = cell(row, value === null || value === undefined ? "–" : "");
  if (value === true || value === false) {
    const badge = document.createElement("span");
    badge.className = `badge ${value ? "resolved" : "firing"}`;
    badge.textContent = value ? yes : no;
    td.appendChild(badge);
  }
  return td;
}

// The MQTT bridge as Prometheus scrapes it: nothing at all where it scrapes none.
function renderBridge(bridge) {
  $("bridge").hidden = !bridge;
  if (!bridge) return;
  const body = $("bridge-table").querySelector("tbody");
  body.replaceChildren();
  for (const b of bridge.instances) {
    const row = document.createElement("tr");
    row.dataset.instance = b.instance;
    cell(row, b.instance);
    flag(row, b.up, "up", "down").title = b.scrape_error || "";
    flag(row, b.mqtt_connected, "connected", "disconnected");
    flag(row, b.kafka_reachable, "reachable", "unreachable");
    cell(row, number(b.received_per_second), "num");
    cell(row, number(b.forwarded_per_second), "num");
    cell(row, b.in_flight === null ? "–" : String(b.in_flight), "num");
    cell(row, duration(b.oldest_unacknowledged_age_seconds), "num");
    const errors = Object.entries(b.errors).filter(([, n]) => n > 0);
    cell(row, errors.length ? errors.map(([kind, n]) => `${kind} ${n}`).join(", ") : "none");
    body.appendChild(row);
  }
  const chart = bridge.messages;
  const names = Object.keys(chart.lines);
  const lines = names.map((n, i) => ({ label: n, stroke: QUERY_COLORS[i % QUERY_COLORS.length], spanGaps: true }));
  draw("bridge-messages", lines, [chart.t, ...names.map((n) => chart.lines[n])]);
}

function showError(error) {
  $("status").textContent = `error: ${error.message}`;
  $("status").classList.add("error");
}

async function refresh() {
  const mine = ++refreshesStarted;
  try {
    const [incidents, summary, alerts, timeline, sensors, pipeline, prometheus] = await Promise.all([
      getJson("/api/incidents?limit=500"),
      getJson("/api/alerts/summary"),
      getJson("/api/alerts?limit=500"),
      getJson("/api/alerts/timeline"),
      getJson("/api/sensors"),
      getJson("/api/pipeline"),
      getJson("/api/pipeline/prometheus"),
    ]);
    // An older refresh that answers late (one started before a silence was created)
    // must not draw over a newer one.
    if (mine < newestRendered) return;
    newestRendered = mine;
    renderAlerts(alerts); // first: it drops the live alerts the lake now has
    renderIncidents(incidents);
    renderSummary(summary);
    renderTimeline(timeline);
    await refreshTemperature(renderSensors(sensors));
    renderPipeline(pipeline);
    renderPrometheus(prometheus);
    refreshes += 1;
    document.body.dataset.refreshes = String(refreshes);
    $("status").classList.remove("error");
    $("status").textContent = `updated ${new Date().toISOString().slice(11, 19)} UTC, every ${config.refresh_seconds} s`;
  } catch (error) {
    showError(error);
  }
}

async function start() {
  config = await getJson("/api/config");
  $("lake").textContent = `lake ${config.lake}`;
  for (const id of ["alertmanager-link", "alertmanager-panel-link"]) {
    $(id).href = config.alertmanager_url;
    $(id).hidden = false;
  }
  if (config.prometheus_url) {
    $("prometheus-link").href = config.prometheus_url;
    $("prometheus-link").hidden = false;
  }
  $("sensor").addEventListener("change", (event) => selectSensor(event.target.value));
  await refresh();
  followLive();
  setInterval(refresh, config.refresh_seconds * 1000);
}

start().catch(showError);
