/** One line to stderr, prefixed like every jobrt message. */
export function say(message: string): void {
  process.stderr.write(`jobrt: ${message}\n`);
}
