// Preloaded into a worker replica the fleet benchmark starts: answers "memory" over IPC with
// process.memoryUsage(), so the benchmark reads the heap without touching the worker's code.
process.on("message", (m) => {
  if (m === "memory" && process.send) process.send({ memory: process.memoryUsage() });
});
