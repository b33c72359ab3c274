#!/usr/bin/env node
// A minimal "harness" for the shell harness: a multi-turn chat through the
// capturing proxy with nothing but the environment polar provides
// (OPENAI_BASE_URL, OPENAI_API_KEY, POLAR_INSTRUCTION). Odd turns stream.
// TURNS (default 2) and DELAY_MS (default 0, before each call) shape it.
const base = process.env.OPENAI_BASE_URL;
const key = process.env.OPENAI_API_KEY;
const turns = Number(process.env.TURNS ?? 2);
const delayMs = Number(process.env.DELAY_MS ?? 0);
const messages = [{ role: "user", content: process.env.POLAR_INSTRUCTION ?? "hello" }];

async function call(stream) {
  const res = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "polar-demo", messages, stream, max_tokens: 48 }),
  });
  if (!res.ok) throw new Error(`model call failed: HTTP ${res.status} ${await res.text()}`);
  if (!stream) return (await res.json()).choices[0].message.content;
  let text = "";
  let finish = null;
  for (const block of (await res.text()).split("\n\n")) {
    const data = block.replace(/^data: /, "").trim();
    if (!data || data === "[DONE]") continue;
    const chunk = JSON.parse(data);
    for (const c of chunk.choices ?? []) {
      text += c.delta?.content ?? "";
      finish = c.finish_reason ?? finish;
    }
  }
  if (!finish) throw new Error("stream ended without a finish_reason");
  return text;
}

for (let i = 0; i < turns; i++) {
  if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
  const answer = await call(i % 2 === 1);
  console.log(`turn ${i + 1}: ${answer}`);
  messages.push({ role: "assistant", content: answer }, { role: "user", content: `Go on (turn ${i + 2}).` });
}
