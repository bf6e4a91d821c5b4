// triage.mjs: a bug-triage agent's loop, driven through the official
// TypeScript MCP SDK's client against `computerfs mcp` over stdio.
//
//   node triage.mjs COMPUTERFS MOUNTPOINT SUMMARY
//
// It reads the task, greps the code, runs the failing test in the sandbox,
// fixes the code with an edit, runs the tests twice (the second from the
// build cache), commits, writes SUMMARY under /workspace/data, and prints
// one JSON line of what it measured. Any step that does not answer as it
// should ends it with status 1 and the reason on stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, mnt, summary] = process.argv.slice(2);
if (!bin || !mnt || !summary) {
  console.error("usage: node triage.mjs COMPUTERFS MOUNTPOINT SUMMARY");
  process.exit(2);
}

const client = new Client({ name: "computerfs-triage-ts", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: bin, args: ["mcp", "-w", mnt], stderr: "inherit" }));

let progress = 0;
// The SDK's default request timeout (60 s) reset by every progress
// notification, as docs/mcp.md says to set it.
const opts = { timeout: 60000, resetTimeoutOnProgress: true, maxTotalTimeout: 900000, onprogress: () => progress++ };

function text(res) {
  return (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
}

async function tool(name, args, want) {
  const res = await client.callTool({ name, arguments: args }, undefined, opts);
  const t = text(res);
  if (res.isError || (want && !t.includes(want))) {
    throw new Error(`${name} ${JSON.stringify(args)}: error ${!!res.isError}, text:\n${t}\nwant it to contain ${JSON.stringify(want)}`);
  }
  return t;
}

function elapsed(t) {
  const m = t.match(/\[exit code (\d+), (\w+) backend, (\d+) ms\]/);
  if (!m) throw new Error(`no exit line in:\n${t}`);
  return { code: Number(m[1]), backend: m[2], ms: Number(m[3]) };
}

try {
  await tool("read", { path: "TASK.md" }, "Sum");
  await tool("grep", { query: "func Sum", path: "repo" }, "/workspace/repo/calc.go:");
  const failing = await client.callTool(
    { name: "exec", arguments: { command: "go test ./...", cwd: "repo", backend: "sandbox", timeoutMs: 600000 } },
    undefined,
    opts,
  );
  const ft = text(failing);
  if (!ft.includes("Sum(2, 3) = -1, want 5") || elapsed(ft).code !== 1) {
    throw new Error(`the failing test did not fail as it should:\n${ft}`);
  }
  await tool("edit", { path: "repo/calc.go", edits: [{ oldText: "return a - b", newText: "return a + b" }] }, "+func Sum(a, b int) int { return a + b }");
  const first = elapsed(await tool("exec", { command: "go test ./...", cwd: "repo", backend: "sandbox", timeoutMs: 600000 }, "ok  \texample.com/calc"));
  const secondText = await tool("exec", { command: "go test ./...", cwd: "repo", backend: "sandbox", timeoutMs: 600000 }, "(cached)");
  const second = elapsed(secondText);
  await tool("exec", { command: "git commit -qam 'calc: Sum adds' && git log --format=%an -1", cwd: "repo" }, "Triage Agent");
  await tool("write", { path: `data/${summary}`, content: "Sum subtracted; it adds now. go test ./... passes.\n" }, "Created");
  console.log(JSON.stringify({ ok: true, first_ms: first.ms, second_ms: second.ms, second_backend: second.backend, progress }));
} catch (e) {
  console.error(String(e.stack || e));
  process.exitCode = 1;
} finally {
  await client.close();
}
