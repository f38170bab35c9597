/** Entry of serveGitApart (apart.ts): serves argv[2]'s repositories, prints `{"url"}`, stops on SIGTERM or at the end of stdin. */
import { startGitServer } from "./server.js";

const root = process.argv[2];
if (!root) throw new Error("usage: apart-main.ts <root>");
const server = await startGitServer({ root, host: "127.0.0.1" });
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
const stop = () => void server.close().then(() => process.exit(0));
process.once("SIGTERM", stop);
// The process that started us gone (stopped by a signal, crashed), our stdin ends: stop too.
process.stdin.once("end", stop);
process.stdin.resume();
