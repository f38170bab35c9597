// Preloaded into a worker replica the fleet benchmark starts: answers "memory" over IPC with
// process.memoryUsage(), so the benchmark reads the heap without touching the worker's code; and,
// asked with {profile: "start"} / {profile: "stop", file}, records a CPU profile of the worker
// (written as a .cpuprofile file, for Chrome DevTools or speedscope).
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

// A full collection on request (FLEET_GC_PROBE): the live heap, beside what the probe reports.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc");

let session;
process.on("message", (m) => {
  if (m === "memory" && process.send) {
    const memory = process.memoryUsage();
    if (process.env.FLEET_GC_PROBE) {
      gc();
      const after = process.memoryUsage();
      process.stderr.write(
        `probe ${process.pid}: heapUsed ${(memory.heapUsed / 2 ** 20).toFixed(0)} MiB, after a full GC ${(after.heapUsed / 2 ** 20).toFixed(0)} MiB, rss ${(after.rss / 2 ** 20).toFixed(0)} MiB\n`,
      );
    }
    process.send({ memory });
  }
  if (m && typeof m === "object" && m.profile === "start") {
    session = new Session();
    session.connect();
    session.post("Profiler.enable", () =>
      session.post("Profiler.setSamplingInterval", { interval: 500 }, () =>
        session.post("Profiler.start", () => process.send?.({ profile: "started" })),
      ),
    );
  }
  if (m && typeof m === "object" && m.profile === "stop" && session) {
    session.post("Profiler.stop", (err, r) => {
      if (!err) writeFileSync(m.file, JSON.stringify(r.profile));
      session.disconnect();
      session = undefined;
      process.send?.({ profile: "stopped" });
    });
  }
});

// The benchmark gone (stopped with a signal, crashed), its IPC channel closes: stop as the worker
// stops on SIGTERM, rather than run on beside the next benchmark. That stop gives branches back
// through an API server that may have gone with the benchmark: past 10 s it exits anyway.
process.on("disconnect", () => {
  setTimeout(() => process.exit(1), 10_000).unref();
  process.kill(process.pid, "SIGTERM");
});
