import { closeSync, lstatSync, rmSync } from "node:fs";
import { type Server, type Socket, createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { findPerl } from "../../perl.js";
import { FORKER_PROGRAM } from "../forker/forker.js";

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

  /**
   * Listens at `path`, then closes `lockFd` (the entry's lock, when it holds one); undefined (and
   * the lock let go) if it cannot.
   */
  static async open(
    path: string,
    lockFd: number | undefined,
    warn: (line: string) => void,
  ): Promise<NodeStepListener | undefined> {
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
        if (lockFd !== undefined) closeSync(lockFd);
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

/** The joiner's program (joiner.pl), beside this module in src/ and dist/, and in the CLI's dist/. */
const JOINER_PROGRAM = join(dirname(fileURLToPath(import.meta.url)), "joiner.pl");

/**
 * The command that joins the node step listening at `socket` as a task whose `jobrt exec` argv is
 * `argv` (the testkit checks a runtime on the join path with it); undefined without perl.
 */
export function joinerCommand(socket: string, argv: string[]): string[] | undefined {
  const found = findPerl();
  if (!("perl" in found)) return undefined;
  return [found.perl, "-f", "--", JOINER_PROGRAM, FORKER_PROGRAM, socket, ...argv];
}
