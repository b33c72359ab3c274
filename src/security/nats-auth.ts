/**
 * How an actor authenticates to NATS, and the server side of it for the
 * embedded server of `polar up`. Clients: user/password, token, NKey seed
 * file, `.creds` file (JWT + seed), plus TLS (CA, and a client certificate
 * when the server verifies them). The same settings come from the config
 * (`nats_auth`) or the environment (POLAR_NATS_*).
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { credsAuthenticator, nkeyAuthenticator, nkeys, type ConnectionOptions } from "@nats-io/transport-node";
import { z } from "zod";
import { PolarError } from "../protocol/errors.ts";
import { ROLE_PERMISSIONS, ROLES, type Role, type RolePermissions } from "./nats-roles.ts";

export const NatsAuth = z.strictObject({
  user: z.string().min(1).optional(),
  password: z.string().min(1).optional(),
  token: z.string().min(1).optional(),
  /** File holding an NKey user seed (`SU...`). */
  nkey_seed_file: z.string().min(1).optional(),
  /** A `.creds` file (user JWT and seed), as `nsc` writes it. */
  creds_file: z.string().min(1).optional(),
  /** CA bundle that signed the server's certificate (turns TLS on). */
  tls_ca_file: z.string().min(1).optional(),
  tls_cert_file: z.string().min(1).optional(),
  tls_key_file: z.string().min(1).optional(),
});
export type NatsAuth = z.infer<typeof NatsAuth>;

/** POLAR_NATS_USER/_PASSWORD/_TOKEN/_NKEY (seed file)/_CREDS/_CA/_CERT/_KEY. */
export function natsAuthFromEnv(env: NodeJS.ProcessEnv = process.env): NatsAuth | undefined {
  const a: NatsAuth = {
    user: env.POLAR_NATS_USER || undefined,
    password: env.POLAR_NATS_PASSWORD || undefined,
    token: env.POLAR_NATS_TOKEN || undefined,
    nkey_seed_file: env.POLAR_NATS_NKEY || undefined,
    creds_file: env.POLAR_NATS_CREDS || undefined,
    tls_ca_file: env.POLAR_NATS_CA || undefined,
    tls_cert_file: env.POLAR_NATS_CERT || undefined,
    tls_key_file: env.POLAR_NATS_KEY || undefined,
  };
  return Object.values(a).some((v) => v !== undefined) ? a : undefined;
}

function readSecret(path: string, what: string): Uint8Array {
  try {
    return new Uint8Array(readFileSync(path));
  } catch (err) {
    throw new PolarError("validation", `cannot read the NATS ${what} file ${path}`, { cause: err });
  }
}

/** Connection options for one actor's credentials (nothing when `auth` is undefined). */
export function natsConnectOptions(auth: NatsAuth | undefined): Partial<ConnectionOptions> {
  if (!auth) return {};
  const o: Partial<ConnectionOptions> = {};
  if (auth.user) Object.assign(o, { user: auth.user, pass: auth.password ?? "" });
  if (auth.token) o.token = auth.token;
  if (auth.creds_file) o.authenticator = credsAuthenticator(readSecret(auth.creds_file, "creds"));
  else if (auth.nkey_seed_file) {
    const seed = new TextDecoder().decode(readSecret(auth.nkey_seed_file, "NKey seed")).trim();
    o.authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
  }
  if (auth.tls_ca_file || auth.tls_cert_file) {
    o.tls = { caFile: auth.tls_ca_file, certFile: auth.tls_cert_file, keyFile: auth.tls_key_file };
  }
  return o;
}

// ------------------------------------------------------------ server side

/** One user of the embedded server: a password or an NKey public key, and its role's permissions. */
export interface ServerUser {
  role: Role;
  user?: string;
  password?: string;
  /** NKey public key (`U...`). */
  nkey?: string;
}

export interface ServerTls {
  cert_file: string;
  key_file: string;
  /** CA for client certificates; with `verify` the server requires them. */
  ca_file?: string;
  verify?: boolean;
}

/** The `authorization` and `tls` blocks of a nats-server config (JSON is valid config syntax). */
export function serverAuthConfig(users: ServerUser[] | { token: string } | undefined, tls?: ServerTls): string {
  const lines: string[] = [];
  if (users && "token" in users) lines.push(`authorization: ${JSON.stringify({ token: users.token })}`);
  else if (users?.length) {
    const list = users.map((u) => {
      const perms: RolePermissions = ROLE_PERMISSIONS[u.role];
      return u.nkey ? { nkey: u.nkey, permissions: perms } : { user: u.user, password: u.password, permissions: perms };
    });
    lines.push(`authorization: ${JSON.stringify({ users: list })}`);
  }
  if (tls) lines.push(`tls: ${JSON.stringify({ ...tls, timeout: 5 })}`);
  return lines.join("\n");
}

/** A fresh user and random password per role (for the embedded server of `polar up`). */
export function generateRoleUsers(): Record<Role, NatsAuth & { user: string; password: string }> {
  const out = {} as Record<Role, NatsAuth & { user: string; password: string }>;
  for (const role of ROLES) out[role] = { user: `polar-${role}`, password: randomBytes(24).toString("base64url") };
  return out;
}

export function serverUsersFrom(creds: Partial<Record<Role, NatsAuth>>): ServerUser[] {
  return Object.entries(creds).map(([role, a]) => ({ role: role as Role, user: a!.user, password: a!.password }));
}

/** A new NKey user: its public key (for the server) and seed (for the client). */
export function createNkeyUser(): { publicKey: string; seed: string } {
  const kp = nkeys.createUser();
  return { publicKey: kp.getPublicKey(), seed: new TextDecoder().decode(kp.getSeed()) };
}
