import { closeSync, lstatSync, rmSync } from "node:fs";
import { type Server, type Socket, createServer } from "node:net";

/**
 * The node step's socket (docs/node-step.md, "The rendezvous"), listened on by the node's jobrt
 * while it holds the lock the entry (jobrt.pl) took, then the lock is let go. Connections that
 * come before the step is ready wait here until `accept`.
 */
export class NodeStepListener {
  readonly #server: Server;
  readonly #path: string;
  readonly #ino: number;
  #waiting: Socket[] = [];
  #handler: ((socket: Socket) => void) | undefined;
  #closed = false;

  private constructor(server: Server, path: string) {
    this.#server = server;
    this.#path = path;
    this.#ino = lstatSync(path).ino;
    server.on("connection", (socket) => {
      if (this.#closed) socket.destroy();
      else if (this.#handler) this.#handler(socket);
      else this.#waiting.push(socket);
    });
  }

  /** Listens at `path`, then closes `lockFd`; undefined (and the lock let go) if it cannot. */
  static async open(path: string, lockFd: number, warn: (line: string) => void): Promise<NodeStepListener | undefined> {
    const server = createServer({ pauseOnConnect: true });
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen({ path, backlog: 4096 }, () => resolve());
      });
      return new NodeStepListener(server, path);
    } catch (error) {
      warn(
        `the step's other tasks on this node run their own jobrt: cannot listen on ${path}: ${(error as Error).message}`,
      );
      server.close();
      return undefined;
    } finally {
      try {
        closeSync(lockFd);
      } catch {
        // not ours to close after all: nothing holds the lock
      }
    }
  }

  /** From now on each joiner (and each that waited) goes to `handler`, paused. */
  accept(handler: (socket: Socket) => void): void {
    this.#handler = handler;
    for (const socket of this.#waiting.splice(0)) handler(socket);
  }

  /** No more joiners: the socket goes (if it is still ours), and so does any joiner not yet served. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      if (lstatSync(this.#path).ino === this.#ino) rmSync(this.#path);
    } catch {
      // already gone
    }
    this.#server.close();
    for (const socket of this.#waiting.splice(0)) socket.destroy();
  }
}

/**
 * The node step this jobrt is the host of, if the entry (jobrt.pl) made it so: its lock and
 * socket come in the environment, and leave it here, before any task's environment is made.
 */
export function openNodeStep(warn: (line: string) => void): Promise<NodeStepListener | undefined> {
  const { JOBRT_NODE_STEP_LOCK_FD: lock, JOBRT_NODE_STEP_SOCKET: path } = process.env;
  delete process.env.JOBRT_NODE_STEP_LOCK_FD;
  delete process.env.JOBRT_NODE_STEP_SOCKET;
  if (lock === undefined || path === undefined || !/^\d{1,9}$/.test(lock)) return Promise.resolve(undefined);
  return NodeStepListener.open(path, Number(lock), warn);
}
