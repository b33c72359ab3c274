/**
 * `normalizeSession(raw)`: a CompletionSession from our shape, the reference's
 * JSON shape, or a SessionResult carrying one (`completion_session`), with
 * completions in arrival order (see order.ts).
 *
 * The reference's shape needs a few coercions before our schema accepts it:
 * a non-dict `request`/`response` is read as `{}` (the reference does the same),
 * a null `metadata` as `{}`, a numeric `completion_id`/`timestamp` as a string,
 * and a missing `completion_count` as the number of completions. Token ids are
 * read where either shape puts them (extract.ts). Anything else invalid throws
 * a ValidationError naming every bad field.
 */
import { ValidationError } from "../protocol/errors.ts";
import { validate } from "../protocol/codec.ts";
import { CompletionSession } from "../protocol/schemas.ts";
import { orderCompletions } from "./order.ts";

type Dict = Record<string, unknown>;
const isDict = (v: unknown): v is Dict => typeof v === "object" && v !== null && !Array.isArray(v);

export function normalizeSession(raw: unknown): CompletionSession {
  const body = unwrap(raw);
  const completions = Array.isArray(body.completions) ? body.completions.map(coerceRecord) : body.completions;
  const session = validate(
    CompletionSession,
    {
      ...body,
      metadata: body.metadata ?? {},
      completions,
      completion_count: body.completion_count ?? (Array.isArray(completions) ? completions.length : 0),
    },
    "completion session",
  );
  session.completions = orderCompletions(session.completions).records;
  return session;
}

function unwrap(raw: unknown): Dict {
  if (!isDict(raw)) throw new ValidationError("completion session", [{ path: "", message: "must be a JSON object" }]);
  if (isDict(raw.completion_session) && !("completions" in raw)) return raw.completion_session;
  return raw;
}

function coerceRecord(r: unknown): unknown {
  if (!isDict(r)) return r;
  const out: Dict = { ...r };
  for (const k of ["request", "response", "original_request", "metadata"] as const) {
    if (!isDict(out[k])) out[k] = {};
  }
  if (typeof out.completion_id === "number") out.completion_id = String(out.completion_id);
  if (typeof out.timestamp === "number") out.timestamp = new Date(out.timestamp * 1000).toISOString();
  return out;
}
