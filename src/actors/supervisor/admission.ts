/**
 * What a submitted task must pass besides its schema: strategy names known to
 * the registries, host uploads only from the upload roots, a callback URL the
 * callback policy allows. Each failure names the field.
 */
import { PolarError, ValidationError } from "../../protocol/errors.ts";
import type { TaskRequest } from "../../protocol/schemas.ts";
import { checkCallbackUrl, type CallbackPolicy } from "../../security/callback-policy.ts";
import { checkTaskUploads } from "../../security/upload-roots.ts";
import type { SpecChecker } from "./tasks.ts";

export function submitChecks(check: SpecChecker | undefined, uploadRoots: readonly string[], policy: CallbackPolicy): SpecChecker {
  return (task: TaskRequest) => {
    check?.(task);
    checkTaskUploads(task, uploadRoots);
    if (task.callback_url) {
      try {
        checkCallbackUrl(task.callback_url, policy);
      } catch (err) {
        if (!(err instanceof PolarError)) throw err;
        throw new ValidationError("task", [{ path: "callback_url", message: err.message }], { cause: err });
      }
    }
  };
}
