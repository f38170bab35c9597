/** `applygate suspend <gittarget>`: see suspend-resume.ts. */
import { setSuspend } from "./suspend-resume.js";

export const run = (argv: string[]) => setSuspend(argv, true);
