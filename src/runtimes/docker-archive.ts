/**
 * File transfer into and out of a container through the Docker archive API
 * (tar streams): modes and symlinks kept, ownership set to the container's
 * root on the way in and to the gateway's user on the way out.
 */
import { once } from "node:events";
import { mkdir, stat } from "node:fs/promises";
import { basename, dirname, posix } from "node:path";
import { pipeline } from "node:stream/promises";
import type Dockerode from "dockerode";
import tarFs from "tar-fs";
import tarStream from "tar-stream";
import { runtimeError } from "./common.ts";

/** Largest file readFile() returns (the rest of the sandbox's files go through download()). */
export const MAX_READ_BYTES = 256 * 1024 * 1024;

/** `remote` as an archive entry name rooted at "/" (so missing parents are created). */
function entryName(remote: string): string {
  return posix.normalize(remote).replace(/^\/+/, "");
}

export async function putPath(container: Dockerode.Container, localPath: string, remote: string): Promise<void> {
  let st;
  try {
    st = await stat(localPath);
  } catch (e) {
    throw runtimeError(`cannot upload ${localPath}: it does not exist`, e);
  }
  const prefix = entryName(remote);
  const map = (h: tarFs.Headers): tarFs.Headers => ({ ...h, name: posix.join(prefix, h.name), uid: 0, gid: 0 });
  const pack = st.isDirectory()
    ? tarFs.pack(localPath, { map })
    : tarFs.pack(dirname(localPath), { entries: [basename(localPath)], map: (h) => ({ ...map(h), name: prefix }) });
  await putTar(container, pack);
}

export async function putBytes(container: Dockerode.Container, remote: string, content: Uint8Array, mode = 0o644): Promise<void> {
  const pack = tarStream.pack();
  pack.entry({ name: entryName(remote), mode, uid: 0, gid: 0, size: content.length }, Buffer.from(content));
  pack.finalize();
  await putTar(container, pack);
}

async function putTar(container: Dockerode.Container, tar: NodeJS.ReadableStream): Promise<void> {
  try {
    await container.putArchive(tar, { path: "/" });
  } catch (e) {
    throw runtimeError(`cannot copy into container ${container.id.slice(0, 12)}: ${(e as Error).message}`, e);
  }
}

async function getTar(container: Dockerode.Container, remote: string): Promise<NodeJS.ReadableStream> {
  try {
    return await container.getArchive({ path: remote });
  } catch (e) {
    throw runtimeError(`cannot copy ${remote} out of container ${container.id.slice(0, 12)}: ${(e as Error).message}`, e);
  }
}

/** Copies `remote` (file or directory) to `localPath` (its new name). */
export async function getPath(container: Dockerode.Container, remote: string, localPath: string): Promise<void> {
  const tar = await getTar(container, remote);
  const base = posix.basename(posix.normalize(remote));
  const local = basename(localPath);
  await mkdir(dirname(localPath), { recursive: true });
  const extract = tarFs.extract(dirname(localPath), {
    umask: 0,
    chown: false,
    map: (h) => {
      if (h.name !== base && !h.name.startsWith(`${base}/`)) throw runtimeError(`unexpected archive entry ${h.name}`);
      return { ...h, name: local + h.name.slice(base.length) };
    },
  } as tarFs.ExtractOptions);
  try {
    await pipeline(tar, extract);
  } catch (e) {
    throw runtimeError(`cannot copy ${remote} out of the container to ${localPath}`, e);
  }
}

/** The bytes of one file in the container. */
export async function getBytes(container: Dockerode.Container, remote: string): Promise<Uint8Array> {
  const tar = await getTar(container, remote);
  const extract = tarStream.extract();
  let found: Buffer | undefined;
  let error: Error | undefined;
  extract.on("entry", (header, stream, next) => {
    if (found !== undefined || header.type !== "file") {
      if (found === undefined) error = runtimeError(`${remote} is not a regular file`);
      stream.resume();
      stream.on("end", next);
      return;
    }
    if ((header.size ?? 0) > MAX_READ_BYTES) {
      error = runtimeError(`${remote} is larger than ${MAX_READ_BYTES} bytes; download it instead`);
      stream.resume();
      stream.on("end", next);
      return;
    }
    const chunks: Buffer[] = [];
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      found = Buffer.concat(chunks);
      next();
    });
  });
  tar.pipe(extract);
  await once(extract, "finish");
  if (error) throw error;
  if (found === undefined) throw runtimeError(`${remote} not found in the container`);
  return new Uint8Array(found);
}
