// The runtime names in `jobrt runtimes --json` on stdin, one a line (the completion scripts run
// this with the node jobrt runs on; nothing when the input is not that JSON).
let text = "";
process.stdin.setEncoding("utf8").on("data", (d) => {
  text += d;
});
process.stdin.on("end", () => {
  try {
    for (const runtime of JSON.parse(text).runtimes) process.stdout.write(`${runtime.name}\n`);
  } catch {}
});
