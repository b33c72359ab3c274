/**
 * The operator's drain command (`polar.api.node.drain`, `POST /rollout/nodes/{id}/drain`):
 * validated here, forwarded to that gateway's own drain endpoint, answered with its reply.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { request } from "../../nats/messages.ts";
import { validate } from "../../protocol/codec.ts";
import { PolarError } from "../../protocol/errors.ts";
import { NodeDrainReply, NodeDrainRequest } from "../../protocol/schemas.ts";
import { SUBJECTS } from "../../protocol/subjects.ts";

export async function drainNode(nc: NatsConnection, body: unknown): Promise<NodeDrainReply> {
  const req = validate(NodeDrainRequest, body, "drain request");
  try {
    return validate(NodeDrainReply, await request(nc, SUBJECTS.nodeDrain(req.node_id), req, { timeoutMs: 5000 }), "drain reply");
  } catch (err) {
    if (err instanceof PolarError && err.code === "unavailable") {
      throw new PolarError("not_found", `no gateway node ${req.node_id} is connected`, { details: { node_id: req.node_id } });
    }
    throw err;
  }
}
