// Preloaded into a worker replica the fleet benchmark starts: answers "memory" over IPC with
// process.memoryUsage(), so the benchmark reads the heap without touching the worker's code; and,
// asked with {profile: "start"} / {profile: "stop", file}, records a CPU profile of the worker
// (written as a .cpuprofile file, for Chrome DevTools or speedscope).
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";

let session;
process.on("message", (m) => {
  if (m === "memory" && process.send) process.send({ memory: process.memoryUsage() });
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
