// A small MCP server over stdio (legacy handshake) that misbehaves on request, for the tests in
// tests/mcp.rs and tests/mcp_calls.rs. Modes from argv: "die-at-start" exits at once with a
// reason on stderr.
// "slow-start" answers nothing for its first 10 s ("slow-start:MS" for its first MS ms).
// "stay" does not exit when its stdin ends (only a signal ends it).
// Tools: ok, pid, crash, hang, garbage, flood (stderr), large (1 MB of text, under gjc's message
// cap), big (a 50 MB result, over it), deaf (never answers, and stops reading its stdin).
// With MCP_CALL_LOG set, each tools/call appends the tool's name to that file, so a test can tell
// which calls reached the server.
"use strict";
const [mode, arg] = (process.argv[2] || "").split(":");
const awakeAt = Date.now() + (mode === "slow-start" ? Number(arg || 10000) : 0);
if (mode === "stay") setInterval(() => {}, 1 << 30);
if (mode === "die-at-start") {
  process.stderr.write("fatal: missing API key for the test server\n");
  process.exit(2);
}
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const text = (id, t) => send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text: t }] } });
const tools = ["ok", "pid", "crash", "hang", "garbage", "flood", "large", "big", "deaf"].map((name) => ({
  name,
  description: "misbehaves: " + name,
  inputSchema: { type: "object", properties: {} },
}));
let buf = "";
process.stdin.on("data", (chunk) => {
  buf += chunk;
  let nl;
  while ((nl = buf.indexOf("\n")) >= 0) {
    const line = buf.slice(0, nl);
    buf = buf.slice(nl + 1);
    if (line.trim()) handle(JSON.parse(line));
  }
});
process.stdin.on("end", () => mode === "stay" || process.exit(0));
function handle(m) {
  if (Date.now() < awakeAt) return setTimeout(() => handle(m), awakeAt - Date.now());
  if (m.id === undefined) return;
  switch (m.method) {
    case "initialize":
      return send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "misbehaving", version: "1" } } });
    case "tools/list":
      return send({ jsonrpc: "2.0", id: m.id, result: { tools } });
    case "tools/call":
      if (process.env.MCP_CALL_LOG) require("fs").appendFileSync(process.env.MCP_CALL_LOG, m.params.name + "\n");
      return call(m.id, m.params.name);
    default:
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "Method not found" } });
  }
}
function call(id, name) {
  switch (name) {
    case "ok":
      return text(id, "fine");
    case "pid":
      return text(id, String(process.pid));
    case "crash":
      process.stderr.write("panic: the test server crashed on purpose\n");
      return process.exit(3);
    case "hang":
      return;
    case "deaf":
      // A paused stdin is no reason to live on for node: the timer is.
      setInterval(() => {}, 1 << 30);
      return process.stdin.pause();
    case "garbage":
      process.stdout.write("this is not JSON-RPC\n{broken\n");
      return text(id, "after garbage");
    case "flood":
      process.stderr.write("x".repeat(4 << 20) + "\n");
      return text(id, "after flood");
    case "large":
      return text(id, "z".repeat(1 << 20));
    case "big":
      return text(id, "y".repeat(50 << 20));
  }
}
