#!/usr/bin/env node
// A minimal MCP server over stdio (newline-delimited JSON-RPC 2.0) with one
// tool, `polarmarker_echo`: the harness tests check that each CLI registered
// it by finding the tool in the first request the CLI sends to the model.
import { createInterface } from "node:readline";

const TOOL = {
  name: "polarmarker_echo",
  description: "Echoes the given text back (polar test marker).",
  inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
};

function answer(id, result) {
  process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, result })}\n`);
}

function fail(id, code, message) {
  process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })}\n`);
}

createInterface({ input: process.stdin }).on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined || msg.id === null) return; // a notification
  switch (msg.method) {
    case "initialize":
      return answer(msg.id, {
        protocolVersion: msg.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: { listChanged: false } },
        serverInfo: { name: "polar-marker", version: "1.0.0" },
      });
    case "ping":
      return answer(msg.id, {});
    case "tools/list":
      return answer(msg.id, { tools: [TOOL] });
    case "tools/call":
      return answer(msg.id, { content: [{ type: "text", text: String(msg.params?.arguments?.text ?? "") }] });
    case "resources/list":
      return answer(msg.id, { resources: [] });
    case "resources/templates/list":
      return answer(msg.id, { resourceTemplates: [] });
    case "prompts/list":
      return answer(msg.id, { prompts: [] });
    default:
      return fail(msg.id, -32601, `method not found: ${msg.method}`);
  }
});
