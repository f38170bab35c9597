/**
 * A separate process that serves a Git repository and runs concurrent `git` CLI pushers against
 * it, so their process spawns do not starve the event loop of the worker under test.
 * Protocol (JSON lines): prints {url, root} once serving; on a line "go" starts the pushers;
 * prints {foreign: [...shas]} when every pusher landed all its commits; exits on "stop".
 */
import { createInterface } from "node:readline";
import { GitPeer } from "../git/peer.js";
import { startGitServer } from "../git/server.js";

const peersCount = Number(process.env.PEERS ?? 10);
const commitsEach = Number(process.env.COMMITS ?? 4);

const server = await startGitServer();
const url = await server.createRepo("site", { "README.md": "hi\n" });
process.stdout.write(`${JSON.stringify({ url, root: server.root })}\n`);

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() === "go") {
    const peers = await Promise.all(Array.from({ length: peersCount }, () => GitPeer.clone(url)));
    const foreign: string[] = [];
    await Promise.all(
      peers.map(async (peer, i) => {
        // Staggered starts: contention without every pusher colliding on every round.
        await new Promise((r) => setTimeout(r, i * 250));
        for (let n = 0; n < commitsEach; n++) {
          foreign.push(
            await peer.commitAndPush(`other/peer-${i}/${n}.txt`, `peer ${i} #${n}\n`, `peer ${i} #${n}`, 500),
          );
        }
      }),
    );
    for (const p of peers) await p.remove();
    process.stdout.write(`${JSON.stringify({ foreign })}\n`);
  }
  if (line.trim() === "stop") break;
}
await server.close();
process.exit(0);
