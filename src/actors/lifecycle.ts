/**
 * One lifecycle for every actor: `start…(deps, opts)` resolves to a handle
 * with an idempotent `stop()`, a `closed` promise that resolves with the
 * cause once stopped, and `Symbol.asyncDispose`.
 */

export interface ActorHandle {
  stop(reason?: string): Promise<void>;
  readonly closed: Promise<string>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * Builds a handle whose stop runs the teardown steps in order (children in
 * reverse start order), finishing the sequence even when a step fails.
 */
export function actorHandle<T extends object>(
  extra: T,
  steps: Array<() => Promise<unknown> | unknown>,
  onError: (err: unknown) => void,
): T & ActorHandle {
  let resolveClosed!: (cause: string) => void;
  const closed = new Promise<string>((r) => (resolveClosed = r));
  let stopping: Promise<void> | undefined;
  const stop = (reason = "stopped") => {
    stopping ??= (async () => {
      for (const step of steps) {
        try {
          await step();
        } catch (err) {
          onError(err);
        }
      }
      resolveClosed(reason);
    })();
    return stopping;
  };
  return Object.assign(extra, { stop, closed, [Symbol.asyncDispose]: () => stop() });
}
