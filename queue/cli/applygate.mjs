#!/usr/bin/env node
// Entry point of the `applygate` command: loads TypeScript sources through tsx, then dispatches.
import { register } from "tsx/esm/api";

register();
const { main } = await import("./main.ts");
process.exitCode = await main(process.argv.slice(2));
