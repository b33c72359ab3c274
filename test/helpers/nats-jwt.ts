/**
 * Operator-mode NATS credentials for tests, without `nsc`: an operator, an
 * account (JetStream enabled) and users, as NATS v2 JWTs signed with NKeys,
 * plus the `.creds` file format `nsc` writes and the server config lines of
 * a MEMORY resolver that preloads the accounts.
 */
import { randomBytes } from "node:crypto";
import { nkeys } from "@nats-io/transport-node";

type KeyPair = ReturnType<typeof nkeys.createOperator>;

const b64url = (b: Uint8Array | string) => Buffer.from(b).toString("base64url");
const A32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/** A JWT (`alg: ed25519-nkey`) of `nats` claims about `sub`, signed by `issuer`. */
export function signJwt(issuer: KeyPair, sub: string, name: string, nats: Record<string, unknown>): string {
  const header = b64url(JSON.stringify({ typ: "JWT", alg: "ed25519-nkey" }));
  const jti = Array.from(randomBytes(52), (x) => A32[x % 32]).join("");
  const claims = { jti, iat: Math.floor(Date.now() / 1000), iss: issuer.getPublicKey(), name, sub, nats: { ...nats, version: 2 } };
  const payload = b64url(JSON.stringify(claims));
  const sig = issuer.sign(new TextEncoder().encode(`${header}.${payload}`));
  return `${header}.${payload}.${b64url(sig)}`;
}

const UNLIMITED = { subs: -1, data: -1, payload: -1 };

export interface Operator {
  key: KeyPair;
  jwt: string;
}

export interface Account {
  key: KeyPair;
  jwt: string;
}

export function createOperator(name = "polar-op"): Operator {
  const key = nkeys.createOperator();
  return { key, jwt: signJwt(key, key.getPublicKey(), name, { type: "operator" }) };
}

export function createAccount(op: Operator, name = "POLAR", jetstream = true): Account {
  const key = nkeys.createAccount();
  const js = jetstream ? { mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 } : {};
  const limits = { ...UNLIMITED, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1, ...js };
  return { key, jwt: signJwt(op.key, key.getPublicKey(), name, { type: "account", limits, default_permissions: { pub: {}, sub: {} } }) };
}

/** A user of `account`: its JWT and seed, as a `.creds` file's text. */
export function createUserCreds(account: Account, name = "user", permissions: { pub?: object; sub?: object } = {}): string {
  const key = nkeys.createUser();
  const jwt = signJwt(account.key, key.getPublicKey(), name, { type: "user", ...UNLIMITED, pub: permissions.pub ?? {}, sub: permissions.sub ?? {} });
  return credsFile(jwt, new TextDecoder().decode(key.getSeed()));
}

export function credsFile(jwt: string, seed: string): string {
  return `-----BEGIN NATS USER JWT-----
${jwt}
------END NATS USER JWT------

************************* IMPORTANT *************************
NKEY Seed printed below can be used to sign and prove identity.
NKEYs are sensitive and should be treated as secrets.

-----BEGIN USER NKEY SEED-----
${seed}
------END USER NKEY SEED------

*************************************************************
`;
}

/**
 * nats-server config lines: operator mode with the accounts (and a system
 * account, which JetStream needs) preloaded in a MEMORY resolver.
 */
export function operatorServerConfig(op: Operator, accounts: Account[]): string {
  const sys = createAccount(op, "SYS", false);
  const preload = Object.fromEntries([...accounts, sys].map((a) => [a.key.getPublicKey(), a.jwt]));
  return [
    `operator: ${JSON.stringify(op.jwt)}`,
    `system_account: ${sys.key.getPublicKey()}`,
    "resolver: MEMORY",
    `resolver_preload: ${JSON.stringify(preload)}`,
  ].join("\n");
}
