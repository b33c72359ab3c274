/**
 * A registry of named implementations (builders, evaluators, runtimes,
 * harnesses). Created at start-up and passed down; never a module global.
 * `resolve` validates the config with the implementation's own schema and
 * fails with the list of known names.
 */
import type { z } from "zod";
import { PolarError, ValidationError } from "../protocol/errors.ts";
import { zodIssues } from "../protocol/codec.ts";

export interface Factory<T, D, S extends z.ZodType = z.ZodType> {
  readonly name: string;
  /** Validates `config`; unknown keys should fail (use a strict object). */
  readonly configSchema: S;
  create(config: z.infer<S>, deps: D): T;
}

export class Registry<T, D> {
  readonly #kind: string;
  readonly #factories = new Map<string, Factory<T, D>>();

  constructor(kind: string, factories: Iterable<Factory<T, D>> = []) {
    this.#kind = kind;
    for (const f of factories) this.register(f);
  }

  register(factory: Factory<T, D>): this {
    if (this.#factories.has(factory.name)) throw new TypeError(`${this.#kind} ${factory.name} is already registered`);
    this.#factories.set(factory.name, factory);
    return this;
  }

  has(name: string): boolean {
    return this.#factories.has(name);
  }

  names(): string[] {
    return [...this.#factories.keys()].sort();
  }

  /** Validates the config and returns the parsed value, without creating anything. */
  check(spec: { strategy: string; config?: unknown }): unknown {
    const factory = this.#get(spec.strategy);
    const r = factory.configSchema.safeParse(spec.config ?? {});
    if (!r.success) {
      const issues = zodIssues(r.error).map((i) => ({ path: i.path ? `config.${i.path}` : "config", message: i.message }));
      throw new ValidationError(`${this.#kind} ${spec.strategy} config`, issues);
    }
    return r.data;
  }

  resolve(spec: { strategy: string; config?: unknown }, deps: D): T {
    const config = this.check(spec);
    return this.#get(spec.strategy).create(config, deps);
  }

  #get(name: string): Factory<T, D> {
    const f = this.#factories.get(name);
    if (!f) {
      throw new PolarError("unknown_strategy", `unknown ${this.#kind} ${JSON.stringify(name)}; known: ${this.names().join(", ")}`, {
        details: { kind: this.#kind, name, known: this.names() },
      });
    }
    return f;
  }
}
