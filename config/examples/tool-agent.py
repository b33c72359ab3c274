#!/usr/bin/env python3
"""A minimal tool-calling agent for the shell harness, with nothing but
python3: it sends POLAR_INSTRUCTION to OPENAI_BASE_URL with one `bash` tool,
runs every tool call in the working directory, returns the output, and stops
when the model answers without a tool call (or after MAX_TURNS, default 8)."""
import json
import os
import subprocess
import urllib.request

BASE = os.environ["OPENAI_BASE_URL"].rstrip("/")
KEY = os.environ["OPENAI_API_KEY"]
MAX_TURNS = int(os.environ.get("MAX_TURNS", "8"))
TOOLS = [{
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command in the repository and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}]


def chat(messages):
    body = json.dumps({"model": "polar-agent", "messages": messages, "tools": TOOLS, "max_tokens": 512}).encode()
    req = urllib.request.Request(f"{BASE}/chat/completions", data=body, headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as res:
        return json.load(res)["choices"][0]["message"]


def main():
    messages = [{"role": "user", "content": os.environ.get("POLAR_INSTRUCTION", "")}]
    for turn in range(MAX_TURNS):
        msg = chat(messages)
        messages.append({k: v for k, v in msg.items() if k in ("role", "content", "tool_calls") and v is not None})
        calls = msg.get("tool_calls") or []
        if not calls:
            print(f"turn {turn + 1}: {msg.get('content', '')}")
            return 0
        for call in calls:
            command = json.loads(call["function"]["arguments"] or "{}").get("command", "")
            r = subprocess.run(["bash", "-lc", command], capture_output=True, text=True, timeout=120)
            print(f"turn {turn + 1}: $ {command} -> {r.returncode}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": (r.stdout + r.stderr)[-4000:] + f"\n[exit {r.returncode}]"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
