/**
 * The environment contract every runtime command gets (ARCHITECTURE.md §5):
 * base URLs of the capturing proxy for each vendor dialect and API keys that
 * are the session credential, so an unmodified vendor SDK authenticates as
 * the session without any custom header.
 */

export interface ProxyEnvInput {
  /** Proxy base URL as seen from inside the runtime, without a trailing slash or path. */
  proxyUrl: string;
  credential: string;
  sessionId: string;
  taskId: string;
}

export function proxyEnv(i: ProxyEnvInput): Record<string, string> {
  const base = i.proxyUrl.replace(/\/+$/, "");
  return {
    OPENAI_BASE_URL: `${base}/v1`,
    OPENAI_API_KEY: i.credential,
    ANTHROPIC_BASE_URL: base,
    ANTHROPIC_API_KEY: i.credential,
    GOOGLE_API_URL: base,
    GOOGLE_GEMINI_BASE_URL: base,
    GOOGLE_API_KEY: i.credential,
    GEMINI_API_KEY: i.credential,
    POLAR_SESSION_ID: i.sessionId,
    POLAR_TASK_ID: i.taskId,
    SESSION_ID: i.sessionId,
    TASK_ID: i.taskId,
  };
}

/** POSIX single-quoting: safe for any string, including quotes and newlines. */
export function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'"'"'`)}'`;
}
