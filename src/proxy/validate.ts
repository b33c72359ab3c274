/** Small shape checks for client bodies: each failure names the field (ValidationError). */
import { ValidationError, type FieldIssue } from "../protocol/errors.ts";
import { isObject, type Json } from "./chat-types.ts";

export class ShapeCheck {
  readonly issues: FieldIssue[] = [];
  constructor(private readonly what: string) {}

  fail(path: string, message: string): void {
    this.issues.push({ path, message });
  }

  array(v: unknown, path: string, nonEmpty = false): v is unknown[] {
    if (!Array.isArray(v)) this.fail(path, "must be an array");
    else if (nonEmpty && v.length === 0) this.fail(path, "must not be empty");
    else return true;
    return false;
  }

  object(v: unknown, path: string): v is Json {
    if (isObject(v)) return true;
    this.fail(path, "must be an object");
    return false;
  }

  optString(v: unknown, path: string): void {
    if (v !== undefined && v !== null && typeof v !== "string") this.fail(path, "must be a string");
  }

  optNumber(v: unknown, path: string): void {
    if (v !== undefined && v !== null && (typeof v !== "number" || !Number.isFinite(v))) this.fail(path, "must be a number");
  }

  /** Throws the collected issues, if any. */
  done(): void {
    if (this.issues.length) throw new ValidationError(this.what, this.issues);
  }
}
