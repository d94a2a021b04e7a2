import { type JoinHost, serveJoiner } from "./joinedtask.js";

/**
 * How long the node's jobrt still waits for a task of the step that has not joined once all it
 * runs have ended: a task of `srun --multi-prog` that runs no jobrt never comes.
 */
const JOIN_GRACE_MS = 1000;

/**
 * Serves the step's other tasks on this node while its own run (docs/node-step.md, "The host's
 * life"): resolves with its own tasks' statuses once they and every joined task have ended and
 * either the node's every task has come or none came for JOIN_GRACE_MS; then the socket goes.
 */
export function serveJoiners(host: JoinHost, ownTasks: number, own: Promise<number[]>): Promise<number[]> {
  const { listener, tasksOnNode } = host.options;
  return new Promise((resolve) => {
    let arrived = ownTasks;
    let serving = 0;
    let statuses: number[] | undefined;
    let grace: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(grace);
      listener.close();
      resolve(statuses!);
    };
    const check = () => {
      if (statuses === undefined || serving > 0) return;
      if (arrived >= tasksOnNode || host.ctx.stopping()) finish();
      else grace ??= setTimeout(finish, JOIN_GRACE_MS);
    };
    void own.then((s) => {
      statuses = s;
      check();
    });
    listener.accept((socket) => {
      arrived++;
      serving++;
      clearTimeout(grace);
      grace = undefined;
      void serveJoiner(host, socket).finally(() => {
        serving--;
        check();
      });
    });
  });
}
