/**
 * Concurrent pushers in a process of their own, so their `git` spawns do not starve the event loop
 * of the assembly under test. Each of PEERS clones REPO_URL and pushes COMMITS commits of its own
 * file (pulling and retrying when rejected), starts staggered by STAGGER_MS; prints
 * {foreign: [...shas]} once all landed, then exits.
 */
import { GitPeer } from "../git/peer.js";

const url = process.env.REPO_URL as string;
const peers = Number(process.env.PEERS ?? 10);
const commits = Number(process.env.COMMITS ?? 2);
const stagger = Number(process.env.STAGGER_MS ?? 150);

const clones = await Promise.all(Array.from({ length: peers }, () => GitPeer.clone(url)));
const foreign: string[] = [];
await Promise.all(
  clones.map(async (peer, i) => {
    // Staggered starts: contention without every pusher colliding on every round.
    await new Promise((r) => setTimeout(r, i * stagger));
    for (let n = 0; n < commits; n++) {
      foreign.push(
        await peer.commitAndPush(`other/peer-${i}/${n}.txt`, `peer ${i} #${n}\n`, `peer ${i} #${n}`, 200),
      );
    }
  }),
);
for (const p of clones) await p.remove();
process.stdout.write(`${JSON.stringify({ foreign })}\n`);
process.exit(0);
