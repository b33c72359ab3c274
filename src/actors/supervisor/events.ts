/**
 * `GET /events`: lifecycle events (`polar.event.>`: task created/updated/done,
 * session state changes, nodes joining and leaving) as server-sent events, for
 * dashboards. A comment line every 15 s keeps proxies from closing the stream.
 */
import type { ServerResponse } from "node:http";
import type { NatsConnection } from "@nats-io/transport-node";
import { decode } from "../../protocol/codec.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";

export function streamEvents(nc: NatsConnection, res: ServerResponse, heartbeatMs = 15_000): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" });
  res.write(": polar events\n\n");
  const sub = nc.subscribe(SUBJECTS.eventAll, {
    callback: (err, msg) => {
      if (err) return void res.end();
      let body: unknown;
      try {
        body = decode(msg.data);
      } catch {
        return;
      }
      res.write(`event: ${msg.subject.slice("polar.event.".length)}\ndata: ${JSON.stringify(body)}\n\n`);
    },
  });
  const beat = setInterval(() => res.write(": keep-alive\n\n"), heartbeatMs);
  beat.unref();
  res.once("close", () => {
    clearInterval(beat);
    sub.unsubscribe();
  });
}
