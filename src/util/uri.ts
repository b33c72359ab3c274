/** Percent-decoding that fails as a typed 400 instead of `URIError: URI malformed` (a 500). */
import { PolarError } from "../protocol/errors.ts";

export function decodeSegment(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw);
  } catch (err) {
    throw new PolarError("validation", `${what} has malformed percent-encoding`, {
      details: { reason: "malformed_percent_encoding", value: raw.slice(0, 200) },
      cause: err,
    });
  }
}
