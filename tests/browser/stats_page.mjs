// The stats page in a real browser (headless Chromium driven over the DevTools protocol):
// load the page, take a screenshot, read the table, then tick a server, choose "drain" and
// submit the admin form as a person would, and check the new state on the page and on the CLI.
//
// Usage: node --experimental-websocket tests/browser/stats_page.mjs SLUICE_BINARY OUT_DIR
// Prints one line per check and a last line "N passed, M failed"; exits non-zero on failure.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, statSync } from "node:fs";
import { createServer, createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [binary, outDir] = process.argv.slice(2);
if (!binary || !outDir) {
  console.error("usage: stats_page.mjs SLUICE_BINARY OUT_DIR");
  process.exit(2);
}
const LIMIT_MS = 20000;
let passed = 0;
let failed = 0;
function check(what, ok, detail = "") {
  if (ok) passed++; else failed++;
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${ok || !detail ? "" : `: ${detail}`}`);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function cli(sock, line) {
  return new Promise((resolve, reject) => {
    const c = createConnection(sock);
    let text = "";
    c.on("data", (d) => (text += d));
    c.on("end", () => resolve(text));
    c.on("error", reject);
    c.write(line + "\n");
  });
}

async function until(what, fn) {
  const end = Date.now() + LIMIT_MS;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch {}
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const dir = mkdtempSync(join(tmpdir(), "sluice-browser-"));
const port = await freePort();
const sock = join(dir, "stats.sock");
writeFileSync(join(dir, "sluice.cfg"), `global
    stats socket ${sock} level admin
defaults
    mode http
    timeout connect 1s
    timeout client 10s
    timeout server 10s
listen st
    bind 127.0.0.1:${port}
    stats enable
    stats uri /stats
    stats show-legends
    stats admin if { src 127.0.0.1 }
    server web1 127.0.0.1:9
    server web2 127.0.0.1:10 disabled
`);
const proxy = spawn(binary, ["-f", join(dir, "sluice.cfg")], { stdio: "inherit" });
let browser;
const cleanup = () => {
  if (browser) browser.kill("SIGKILL");
  proxy.kill("SIGKILL");
};
process.on("exit", cleanup);

try {
  await until("the stats socket", () => cli(sock, "show info").then((t) => t.includes("Pid:")));
  browser = spawn(process.env.CHROMIUM || "chromium", [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--remote-debugging-port=0", `--user-data-dir=${join(dir, "profile")}`,
    "--window-size=1400,900", "about:blank",
  ], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  browser.stderr.on("data", (d) => (stderr += d));
  const wsUrl = await until("DevTools to listen", () => stderr.match(/DevTools listening on (ws:\S+)/)?.[1]);

  const ws = new WebSocket(wsUrl);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let nextId = 1;
  const pending = new Map();
  const events = [];
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id && pending.has(msg.id)) {
      const { resolve, reject } = pending.get(msg.id);
      pending.delete(msg.id);
      msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result);
    } else if (msg.method) {
      events.push(msg);
    }
  };
  const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
    const id = nextId++;
    pending.set(id, { resolve, reject });
    ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
  });
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const page = (method, params) => send(method, params, sessionId);
  await page("Page.enable");
  const loaded = async (action) => {
    const before = events.length;
    await action();
    await until("the page to load", () =>
      events.slice(before).some((e) => e.method === "Page.loadEventFired" && e.sessionId === sessionId));
  };
  const evaluate = async (expression) =>
    (await page("Runtime.evaluate", { expression, returnByValue: true })).result.value;

  const url = `http://127.0.0.1:${port}/stats`;
  await loaded(() => page("Page.navigate", { url }));
  const shot = await page("Page.captureScreenshot", { format: "png" });
  const png = join(outDir, "stats_page.png");
  writeFileSync(png, Buffer.from(shot.data, "base64"));
  check("screenshot taken", statSync(png).size > 10000, `${statSync(png).size} bytes`);

  const rows = await evaluate(`[...document.querySelectorAll("tr[data-name]")].map(r =>
      [r.closest("table").id, r.dataset.name, r.querySelector("td.status").textContent])`);
  const status = (px, sv) => rows.find(([p, s]) => p === px && s === sv)?.[2];
  check("the table lists st/FRONTEND open", status("st", "FRONTEND") === "OPEN", JSON.stringify(rows));
  check("the table lists web1 without checks", status("st", "web1") === "no check", JSON.stringify(rows));
  check("the table shows web2 in maintenance", status("st", "web2") === "MAINT", JSON.stringify(rows));
  check("the table lists st/BACKEND up", status("st", "BACKEND") === "UP", JSON.stringify(rows));
  const visible = await evaluate(`(() => { const r = document.querySelector("tr[data-name=web1]").getBoundingClientRect();
      return r.width > 0 && r.height > 0 && r.top < innerHeight; })()`);
  check("web1's row is visible without scrolling", visible === true);

  // Tick web1, choose "drain", press Apply: a POST, a 303 and the page again.
  await loaded(() => evaluate(`(() => {
      document.querySelector("input[name=s][value=web1]").click();
      document.querySelector("select[name=action]").value = "drain";
      document.querySelector("input[type=submit]").click();
      return true; })()`));
  const after = await evaluate(`[location.href, document.querySelector("tr[data-name=web1] td.status").textContent,
      document.querySelector(".notice")?.textContent ?? ""]`);
  check("the form redirected to ;st=DONE", after[0].endsWith("/stats;st=DONE"), after[0]);
  check("the page shows web1 draining", after[1] === "DRAIN", after[1]);
  check("the page says the action was processed", after[2].includes("successfully"), after[2]);
  const stat = await cli(sock, "show stat st 4 1");
  check("show stat agrees", /\nst,web1,([^,]*,){15}DRAIN,/.test(stat), stat);
  ws.close();
} catch (err) {
  check("browser session", false, err.message);
}
console.log(`${passed} passed, ${failed} failed`);
cleanup();
process.exit(failed === 0 && passed > 0 ? 0 : 1);
