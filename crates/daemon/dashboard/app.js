// The Ferry node dashboard: reads the node's local API (the same /v1 routes as every client)
// and draws what it answers. Plain JavaScript, no build step, nothing loaded from elsewhere.
//
// Safety: node ids, procedure names, results and timelines come from other nodes, so data is
// only ever put into the page as text (textContent, SVG text nodes), never as HTML.
// The token: taken from the address's fragment (#token=…, which the browser never sends to a
// server), kept in this tab's sessionStorage, and removed from the address at once.
"use strict";

const TOKEN_KEY = "ferry-api-token";
const REFRESH_MS = 2000;
/** Procedures change only with the configuration: read them every this many refreshes. */
const PROCEDURES_EVERY = 10;
/** The store's listing is read every this many refreshes, and when its count changes... */
const BUNDLES_EVERY = 15;
/** ...unless it holds more bundles than this. */
const BIG_STORE = 1000;
let lastStored = -1;
/** Most rows a list shows (the newest calls; the first bundles of the store). */
const MAX_ROWS = 50;
/** DTN epoch (2000-01-01T00:00:00Z) in Unix milliseconds. */
const DTN_EPOCH_MS = 946684800000;

let token = null;
let timer = null;
let tick = 0;
let selected = null; // the call id shown in detail
let socket = null; // the WebSocket watching it
let knownNodes = new Set();
let selfId = "";

// ----- small helpers -----

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";
function s(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function fmtBytes(n) {
  if (n === undefined || n === null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 1 : 0)) + " " + units[i];
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function fmtSecs(s) {
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs} h ${m % 60} min`;
  return `${Math.floor(hrs / 24)} days ${hrs % 24} h`;
}

/** A time of the API (ms since the DTN epoch; 0 is unknown) as local clock time. */
function fmtTime(ms) {
  if (!ms) return "?";
  const d = new Date(ms + DTN_EPOCH_MS);
  return d.toLocaleTimeString([], { hour12: false });
}

function fmtOffset(ms) {
  return "+" + (ms / 1000).toFixed(3) + "s";
}

/** `dtn://bravo/` → `bravo` (other ids as they are). */
function shortName(id) {
  const m = /^dtn:\/\/([^/]+)\/$/.exec(id || "");
  return m ? m[1] : id;
}

function setText(id, text) {
  $(id).textContent = text;
}

function fillTable(tableId, rows, emptyId) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren(...rows);
  $(emptyId).hidden = rows.length > 0;
  $(tableId).hidden = rows.length === 0;
}

function showBanner(text) {
  const b = $("banner");
  b.textContent = text || "";
  b.hidden = !text;
}

function setLive(ok) {
  const live = $("live");
  live.textContent = ok ? "live" : "offline";
  live.className = "live " + (ok ? "on" : "off");
}

// ----- the token -----

function takeTokenFromAddress() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const given = fragment.get("token");
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given.trim());
    // Out of the address bar, the history and any bookmark.
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function askForToken(why) {
  stop();
  token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("main").hidden = true;
  $("forget-token").hidden = true;
  $("login").hidden = false;
  setLive(false);
  showBanner(why || "");
  $("token-input").focus();
}

// ----- the API -----

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options) {
  const opts = options || {};
  const headers = { Authorization: "Bearer " + token };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method: opts.method || "GET",
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch (e) {
    throw new ApiError(0, "unreachable", "the node does not answer (" + e.message + ")");
  }
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch (e) {
    value = null;
  }
  if (!response.ok) {
    const code = (value && value.code) || "http_" + response.status;
    const message = (value && value.message) || text.slice(0, 200);
    if (response.status === 401) {
      askForToken("The node refused the token (" + message + ").");
    }
    throw new ApiError(response.status, code, message);
  }
  return value;
}

// ----- refreshing -----

function start() {
  $("login").hidden = true;
  $("main").hidden = false;
  $("forget-token").hidden = false;
  stop();
  tick = 0;
  lastStored = -1;
  refresh();
  timer = setInterval(() => {
    if (!document.hidden) refresh();
  }, REFRESH_MS);
}

function stop() {
  if (timer !== null) clearInterval(timer);
  timer = null;
}

let refreshing = false;

async function refresh() {
  // A slow node is not asked again before it answered.
  if (refreshing) return;
  refreshing = true;
  const withProcedures = tick % PROCEDURES_EVERY === 0;
  tick += 1;
  try {
    const [status, peers, routes, calls, served, procedures] = await Promise.all([
      api("/v1/status"),
      api("/v1/peers"),
      api("/v1/routes"),
      api("/v1/calls"),
      api("/v1/served"),
      withProcedures ? api("/v1/procedures") : Promise.resolve(null),
    ]);
    // The store's listing can be long: read it when its count changed (a small store) or
    // every BUNDLES_EVERY refreshes, not every time.
    const storeChanged = status.stored_bundles !== lastStored && status.stored_bundles <= BIG_STORE;
    const bundles = storeChanged || tick % BUNDLES_EVERY === 1 ? await api("/v1/bundles") : null;
    if (bundles) lastStored = status.stored_bundles;
    setLive(true);
    showBanner("");
    drawStatus(status);
    drawPeers(peers);
    drawRoutes(routes);
    drawMesh(status, peers, routes);
    drawCalls(calls);
    drawServed(served);
    if (bundles) drawBundles(bundles);
    if (procedures) drawProcedures(procedures);
    learnNodes(peers, routes);
  } catch (e) {
    if (e.status === 401) return; // askForToken has it
    setLive(false);
    showBanner(e.message + (e.code ? " (" + e.code + ")" : ""));
  } finally {
    refreshing = false;
  }
}

function drawStatus(st) {
  selfId = st.node_id;
  setText("node-id", st.node_id);
  document.title = "Ferry " + shortName(st.node_id);
  setText("version", "v" + st.version);
  setText("uptime", "up " + fmtSecs(st.uptime_s));
  setText("strategy", st.strategy + " routing");
  setText("listening", (st.listening || []).join("  "));

  const quota = st.store_quota || 0;
  setText("store-bytes", fmtBytes(st.stored_bytes));
  $("store-bar").style.width = quota ? Math.min(100, (100 * st.stored_bytes) / quota) + "%" : "0";
  setText(
    "store-detail",
    `${plural(st.stored_bundles, "bundle")} of ${fmtBytes(quota)} quota; ${st.inbox_bundles} waiting in inboxes`,
  );

  const rpc = st.rpc || {};
  const budget = rpc.file_budget || 0;
  setText("files-bytes", fmtBytes(rpc.file_bytes || 0));
  $("files-bar").style.width = budget ? Math.min(100, (100 * (rpc.file_bytes || 0)) / budget) + "%" : "0";
  setText("files-detail", `of ${fmtBytes(budget)}: call parameters and result files`);

  const c = st.counters;
  setText("traffic", `${c.bundles_received} in · ${c.bundles_sent} out`);
  setText(
    "traffic-detail",
    `${c.delivered} delivered here, ${c.duplicates} duplicates, ${c.dropped} dropped; ${fmtBytes(c.bytes_sent)} sent`,
  );

  setText("calls-count", `${rpc.calls_made || 0} made · ${rpc.calls_accepted || 0} served`);
  setText(
    "calls-detail",
    `${rpc.calls_rejected || 0} refused, ${rpc.executions || 0} runs (${rpc.running || 0} now), ` +
      `${rpc.duplicates || 0} answered from the cache`,
  );
}

function drawPeers(peers) {
  fillTable(
    "peers",
    peers.map((p) =>
      h(
        "tr",
        {},
        h("td", { class: "mono" }, p.node_id),
        h("td", {}, p.cla.join(", ") + (p.outbound ? " (dialled)" : " (accepted)")),
        h("td", { class: "mono" }, p.listen_address || p.address),
        h("td", {}, fmtSecs(p.up_s)),
        h("td", {}, fmtBytes(p.queued_bytes)),
      ),
    ),
    "peers-empty",
  );
}

function drawRoutes(routes) {
  fillTable(
    "routes",
    routes.map((r) =>
      h(
        "tr",
        {},
        h("td", { class: "mono" }, r.destination),
        h("td", { class: "mono" }, r.next_hop),
        h("td", {}, r.hops),
        h(
          "td",
          {},
          r.via === "plan" ? `plan: leaves ${fmtTime(r.departs_ms)}, arrives ${fmtTime(r.arrives_ms)}` : r.via,
        ),
      ),
    ),
    "routes-empty",
  );
}

function learnNodes(peers, routes) {
  const names = new Set();
  for (const p of peers) names.add(p.node_id);
  for (const r of routes) names.add(r.destination);
  const same = names.size === knownNodes.size && [...names].every((n) => knownNodes.has(n));
  if (same) return;
  knownNodes = names;
  $("known-nodes").replaceChildren(...[...names].sort().map((n) => h("option", { value: shortName(n) })));
}

function drawProcedures(procedures) {
  fillTable(
    "procedures",
    procedures.map((p) =>
      h(
        "tr",
        {},
        h("td", { class: "mono" }, p.name + (p.restricted ? " (listed callers)" : "")),
        h("td", { class: "mono" }, signature(p)),
        h("td", {}, p.executions || 0),
        h(
          "td",
          {},
          (p.description || "") +
            (p.require ? ` (needs ${p.require})` : "") +
            (p.served_by === "application" ? (p.connected ? " [application]" : " [application, not connected]") : ""),
        ),
      ),
    ),
    "procedures-empty",
  );
  $("known-procedures").replaceChildren(...procedures.map((p) => h("option", { value: p.name })));
}

/** `a: int, b: int -> text` where the procedure declares names and its value, else the types. */
function signature(p) {
  const params = (p.parameters && p.parameters.length ? p.parameters : (p.params || []).map((t) => ({ type: t })))
    .map((x) => (x.name ? `${x.name}: ${x.type}` : x.type))
    .join(", ");
  return params + (p.returns ? ` → ${p.returns}` : "");
}

function drawBundles(bundles) {
  const now = Date.now() - DTN_EPOCH_MS;
  const shown = bundles.slice(0, MAX_ROWS);
  fillTable(
    "bundles",
    shown.map((b) =>
      h(
        "tr",
        {},
        h("td", { class: "mono ellipsis wide", title: b.id }, b.id),
        h("td", { class: "mono" }, b.destination),
        h("td", {}, fmtBytes(b.size)),
        h("td", {}, b.expiry_ms > now ? "in " + fmtSecs(Math.round((b.expiry_ms - now) / 1000)) : "expired"),
        h("td", {}, b.retention),
      ),
    ),
    "bundles-empty",
  );
  setText("bundles-hint", bundles.length > shown.length ? `the first ${shown.length} of ${bundles.length}` : "");
}

// ----- the mesh -----

/** Columns of the drawing: this node, then one per hop; farther nodes share the last. */
const MESH_COLUMNS = 4;

/**
 * A layered drawing, left to right by hops: this node, its neighbours (peers, one-hop routes),
 * then the nodes its routes reach, each joined to the next hop it is reached through (this node
 * knows no more of the path: a route of more hops than the columns show is dashed and says how
 * many). Contact-plan routes are dotted. Within a column, nodes keep the order of the ones they
 * are reached through, so lines seldom cross.
 */
function drawMesh(status, peers, routes) {
  const svg = $("mesh");
  const W = 640;
  const H = 360;
  const me = status.node_id;
  const peerIds = new Set(peers.map((p) => p.node_id));
  const cla = new Map(peers.map((p) => [p.node_id, p.cla]));

  // Each node's column (hops, capped) and the node it hangs from.
  const column = new Map([[me, 0]]);
  const parent = new Map();
  for (const id of peerIds) {
    column.set(id, 1);
    parent.set(id, me);
  }
  const sorted = [...routes].sort((a, b) => a.hops - b.hops || a.destination.localeCompare(b.destination));
  for (const r of sorted) {
    if (r.destination === me || column.has(r.destination)) continue;
    const direct = r.hops <= 1 || r.next_hop === r.destination;
    if (!direct && !column.has(r.next_hop)) {
      column.set(r.next_hop, 1);
      parent.set(r.next_hop, me);
    }
    column.set(r.destination, direct ? 1 : Math.min(MESH_COLUMNS - 1, Math.max(2, r.hops)));
    parent.set(r.destination, direct ? me : r.next_hop);
  }
  const route = new Map(routes.map((r) => [r.destination, r]));

  // Place column by column, each ordered by its parents' places.
  const pos = new Map();
  const used = Math.max(...column.values()) + 1;
  const colX = (c) => (used === 1 ? W / 2 : 70 + (c * (W - 140)) / (used - 1));
  for (let c = 0; c < used; c++) {
    const ids = [...column.entries()].filter(([, col]) => col === c).map(([id]) => id);
    const rank = (id) => (parent.has(id) && pos.has(parent.get(id)) ? pos.get(parent.get(id)).y : 0);
    ids.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    ids.forEach((id, i) => {
      pos.set(id, { x: colX(c), y: ((i + 1) * H) / (ids.length + 1) - 8 });
    });
  }

  const edges = s("g", { class: "edges" });
  const nodes = s("g", { class: "nodes" });
  for (const [id, from] of parent) {
    const a = pos.get(from);
    const b = pos.get(id);
    const r = route.get(id);
    let cls = "route";
    let label = "";
    if (from === me && peerIds.has(id)) {
      cls = "link";
      label = (cla.get(id) || []).join("+");
    } else if (r && r.via === "plan") {
      cls = "plan";
      label = "plan";
    } else if (r && r.hops > column.get(id)) {
      cls = "route far";
      label = `${r.hops} hops`;
    }
    edges.append(s("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: cls }));
    if (label) {
      edges.append(s("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 7, class: "edge-label" }, label));
    }
  }
  for (const [id, p] of pos) {
    const kind = id === me ? "self" : column.get(id) === 1 ? "near" : "far";
    const g = s("g", { class: "node " + kind, "data-node": id, transform: `translate(${p.x},${p.y})` });
    g.append(s("circle", { r: id === me ? 24 : 19 }));
    g.append(s("text", { y: id === me ? 42 : 36, class: "node-label" }, shortName(id)));
    g.append(s("title", {}, id));
    nodes.append(g);
  }
  svg.replaceChildren(edges, nodes);
  if (pos.size === 1) {
    svg.append(s("text", { x: W / 2, y: H / 2 + 70, class: "edge-label" }, "no neighbour and no route now"));
  }
}

// ----- calls -----

function drawCalls(calls) {
  const shown = calls.slice(-MAX_ROWS).reverse();
  fillTable(
    "calls",
    shown.map((c) =>
      h(
        "tr",
        {
          class: "clickable" + (c.id === selected ? " selected" : ""),
          "data-call": c.id,
          onclick: () => select(c.id),
        },
        h("td", {}, fmtTime(c.created_ms)),
        h("td", { class: "mono" }, c.procedure),
        h("td", { class: "mono" }, shortName(c.target)),
        h("td", {}, h("span", { class: "state " + c.state }, c.state)),
        h("td", {}, c.replies.length),
      ),
    ),
    "calls-empty",
  );
  setText("calls-hint", calls.length > shown.length ? `the newest ${shown.length} of ${calls.length}` : "");
}

/** Served calls have no timeline here (the caller keeps it): what, from whom, and where it is. */
function drawServed(served) {
  const shown = served.slice(0, MAX_ROWS);
  const names = { waiting_files: "waiting for files", running: "running", answered: "answered", skipped: "skipped" };
  fillTable(
    "served",
    shown.map((c) =>
      h(
        "tr",
        { "data-call": c.id },
        h("td", {}, fmtTime(c.deadline_ms)),
        h("td", { class: "mono" }, c.procedure),
        h("td", { class: "mono" }, shortName(c.caller)),
        h("td", {}, c.mode),
        h("td", {}, h("span", { class: "state served-" + c.state }, names[c.state] || c.state), c.acked ? " (acked)" : ""),
      ),
    ),
    "served-empty",
  );
  setText("served-hint", served.length > shown.length ? `the latest ${shown.length} of ${served.length}` : "");
}

/** Shows a call and follows it live over its watch WebSocket until it is finished. */
function select(id) {
  if (socket) {
    socket.onclose = null;
    socket.close();
    socket = null;
  }
  selected = id;
  for (const tr of $("calls").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.call === id);
  setText("detail-id", id.slice(0, 8) + "…");
  $("detail-id").title = id;
  $("detail-empty").hidden = true;
  $("detail-body").hidden = false;
  setText("detail-watch", "connecting…");
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  let ws;
  try {
    // The token rides as a subprotocol: a browser cannot set headers on a WebSocket.
    ws = new WebSocket(`${scheme}//${location.host}/v1/calls/${id}/watch`, ["ferry", "ferry-token." + token]);
  } catch (e) {
    // A token that is no valid subprotocol name (a hand-made token file): follow by polling.
    poll(id);
    return;
  }
  socket = ws;
  ws.onopen = () => setText("detail-watch", "live");
  ws.onmessage = (event) => {
    let value;
    try {
      value = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    if (value.code) {
      setText("detail-watch", value.message + " (" + value.code + ")");
      return;
    }
    drawCall(value);
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    socket = null;
    // A finished call ends the watch normally; a lost one is followed by polling.
    poll(id);
  };
}

/** Follows a call by asking for it every second until it is finished or another is chosen. */
async function poll(id) {
  while (selected === id && socket === null && token) {
    try {
      const c = await api(`/v1/calls/${id}`);
      if (selected !== id) return;
      drawCall(c);
      if (c.state !== "waiting") {
        setText("detail-watch", "");
        return;
      }
      setText("detail-watch", "following (every second)");
    } catch (e) {
      setText("detail-watch", e.message);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function drawCall(c) {
  if (c.id !== selected) return;
  // The list follows the live call too, not only the next refresh.
  for (const tr of $("calls").tBodies[0].rows) {
    if (tr.dataset.call !== c.id) continue;
    tr.cells[3].replaceChildren(h("span", { class: "state " + c.state }, c.state));
    tr.cells[4].textContent = c.replies.length;
  }
  const state = $("detail-state");
  state.textContent = c.state;
  state.className = "state " + c.state;
  setText("detail-what", `${c.procedure} on ${c.target} by ${c.transport}`);
  const replies = c.replies.map((r) => {
    const value =
      r.value_text !== undefined
        ? h("pre", { class: "value" }, r.value_text)
        : r.value_base64 !== undefined
          ? h("pre", { class: "value" }, `(${Math.floor((r.value_base64.length * 3) / 4)} bytes, not text)`)
          : null;
    const files = (r.files || []).map((f) =>
      h(
        "li",
        {},
        f.arrived
          ? h("button", { type: "button", class: "quiet", onclick: () => download(f) }, "⬇ " + f.name)
          : f.name,
        ` ${fmtBytes(f.size)}` + (f.arrived ? "" : f.received ? `, ${fmtBytes(f.received)} here` : ", on its way"),
      ),
    );
    return h(
      "div",
      { class: "reply " + (r.ok ? "ok" : "bad") },
      h(
        "div",
        { class: "reply-head" },
        r.ok ? "result" : "refused: " + (r.code || "?"),
        ` from ${r.server} by ${r.via}` + (r.run_ms !== undefined ? `, ran ${r.run_ms} ms` : ""),
      ),
      value,
      r.detail ? h("div", { class: "detail" }, r.detail) : null,
      r.stderr_tail ? h("pre", { class: "value stderr" }, r.stderr_tail) : null,
      files.length ? h("ul", { class: "files" }, ...files) : null,
    );
  });
  $("detail-result").replaceChildren(
    ...(replies.length ? replies : [h("p", { class: "empty" }, c.state === "waiting" ? "waiting…" : "no reply")]),
  );
  $("timeline").replaceChildren(
    ...(c.timeline || []).map((t) => h("li", {}, h("span", { class: "offset" }, fmtOffset(t.offset_ms)), " ", t.text)),
  );
}

/** A result file, fetched with the token and handed to the browser as a download. */
async function download(file) {
  try {
    const response = await fetch(`/v1/files/${file.hash}`, {
      headers: { Authorization: "Bearer " + token },
      credentials: "omit",
    });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const url = URL.createObjectURL(await response.blob());
    const a = h("a", { href: url, download: file.name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) {
    showBanner("cannot fetch " + file.name + ": " + e.message);
  }
}

// ----- the call form -----

/** One parameter line, typed as `ferry call` types its arguments (docs/cli.md). */
function param(line) {
  const i = line.indexOf(":");
  const prefix = i < 0 ? "" : line.slice(0, i);
  const rest = line.slice(i + 1);
  switch (prefix) {
    case "text":
      return { text: rest };
    case "int":
      if (!/^-?\d+$/.test(rest.trim())) throw new Error(`${line}: not an integer`);
      return { int: Number(rest.trim()) };
    case "float": {
      const x = Number(rest.trim());
      if (!Number.isFinite(x) || rest.trim() === "") throw new Error(`${line}: not a number`);
      return { float: x };
    }
    case "bool":
      if (rest !== "true" && rest !== "false") throw new Error(`${line}: a bool is true or false`);
      return { bool: rest === "true" };
    default:
      return { text: line };
  }
}

async function makeCall(event) {
  event.preventDefault();
  const error = $("call-error");
  error.textContent = "";
  const mode = $("call-mode").value;
  const target = mode === "explicit" ? $("call-target").value.trim() : mode;
  if (!target) {
    error.textContent = "Name the node to call.";
    return;
  }
  let params;
  try {
    params = $("call-params")
      .value.split("\n")
      .filter((l) => l.length > 0)
      .map(param);
  } catch (e) {
    error.textContent = e.message;
    return;
  }
  const spec = { target, procedure: $("call-procedure").value.trim(), params };
  if ($("call-transport").value !== "auto") spec.transport = $("call-transport").value;
  if ($("call-deadline").value.trim()) spec.deadline = $("call-deadline").value.trim();
  const button = $("call-submit");
  button.disabled = true;
  try {
    const call = await api("/v1/calls", { method: "POST", body: spec });
    select(call.id);
    drawCall(call);
    refresh();
  } catch (e) {
    error.textContent = e.message + (e.code ? ` (${e.code})` : "");
  } finally {
    button.disabled = false;
  }
}

function modeChanged() {
  const explicit = $("call-mode").value === "explicit";
  $("target-row").hidden = !explicit;
  $("call-target").required = explicit;
}

// ----- start -----

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token-input").value.trim();
    $("token-input").value = "";
    if (!value) return;
    sessionStorage.setItem(TOKEN_KEY, value);
    token = value;
    showBanner("");
    start();
  });
  $("forget-token").addEventListener("click", () => askForToken("The token was forgotten in this tab."));
  $("call-form").addEventListener("submit", makeCall);
  $("call-mode").addEventListener("change", modeChanged);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && token) refresh();
  });
  modeChanged();
  // An address with a new token pasted into this tab.
  window.addEventListener("hashchange", () => {
    if (!new URLSearchParams(location.hash.slice(1)).get("token")) return;
    token = takeTokenFromAddress();
    showBanner("");
    start();
  });
  token = takeTokenFromAddress();
  if (token) start();
  else askForToken("");
});
