import { fstatSync } from "node:fs";
import { type Server, type Socket, connect, createServer } from "node:net";
import { join } from "node:path";

/**
 * A connected pair of Unix stream sockets, as slurmstepd's PMI-2 connection is: `fd` is the end a
 * task gets (its number goes in PMI_FD), `received()` what arrived at the kit's end. Node has no
 * socketpair(2), so the pair is a listening socket's accepted connection and its client.
 */
export interface PmiSocket {
  /** The client end's descriptor in this process, handed to the step session as Slurm hands it to jobrt. */
  fd: number;
  /** Everything written to `fd`'s end, once every copy of it is closed (or after `timeoutMs`). */
  received(timeoutMs: number): Promise<string>;
  /**
   * Closes the kit's end and the listener, and the client end too when the session did not take
   * it over (a step refused before its task started leaves it open).
   */
  close(): void;
}

/**
 * Client ends the session took over: the session closes its copy of the descriptor (as
 * `jobrt exec` closes Slurm's once the task forker holds it), so Node must never close the number
 * again, which by then may be another file's. Kept here so the handles are never collected.
 */
const handedOver: Socket[] = [];

/** Whether `fd` still is the socket of inode `inode`: the session did not close it (no number reused). */
function stillOurs(fd: number, inode: number): boolean {
  try {
    return fstatSync(fd).ino === inode;
  } catch {
    return false;
  }
}

function listen(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => resolve());
  });
}

/** Makes the pair in `dir` (a dir of the kit's: the listening socket's path is there). */
export async function pmiSocket(dir: string): Promise<PmiSocket> {
  const server = createServer();
  await listen(server, join(dir, "pmi.sock"));
  const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
  const client = connect(join(dir, "pmi.sock"));
  // Never read from this end: its descriptor is the session's to close, so libuv must not poll it.
  client.pause();
  await new Promise<void>((resolve, reject) => {
    client.once("connect", resolve);
    client.once("error", reject);
  });
  const peer = await accepted;
  // One turn of the event loop, so libuv is done with the connect's poll of the client end.
  await new Promise((r) => setImmediate(r));
  const fd = (client as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) throw new Error("@jobrt/testkit: no descriptor for the PMI-2 socket");
  const inode = fstatSync(fd).ino;
  client.unref();
  let data = "";
  peer.setEncoding("utf8").on("data", (d: string) => {
    data += d;
  });
  const ended = new Promise<void>((resolve) => peer.once("end", resolve).once("close", resolve));
  return {
    fd,
    async received(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
      clearTimeout(timer);
      return data;
    },
    close() {
      peer.destroy();
      server.close();
      if (stillOurs(fd, inode)) client.destroy();
      else handedOver.push(client);
    },
  };
}
