/** A waitpid(2) status decoded: the exit code, or the number of the signal that ended the process. */
export type WaitStatus = { code: number; signal?: undefined } | { code?: undefined; signal: number };

/** Decodes a raw waitpid status of an ended process (WIFEXITED / WTERMSIG). */
export function decodeWaitStatus(status: number): WaitStatus {
  const signal = status & 0x7f;
  return signal === 0 ? { code: (status >> 8) & 0xff } : { signal };
}
