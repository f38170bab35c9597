/**
 * Git's pkt-line framing (four hex digits of length, then the payload; `0000` is a flush): the
 * wire format of every smart-HTTP request and reply we speak.
 */

export const FLUSH = Buffer.from("0000");
/** Protocol v2's delimiter packet: ends a command's capabilities, before its arguments. */
export const DELIM = Buffer.from("0001");

export function pktLine(payload: string | Buffer): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload) : payload;
  const len = (body.length + 4).toString(16).padStart(4, "0");
  return Buffer.concat([Buffer.from(len), body]);
}

export interface PktReadResult {
  /** Payloads in order; a flush packet is `null`. */
  lines: Array<Buffer | null>;
  /** Offset of the first byte not consumed (e.g. where a raw pack starts). */
  rest: number;
}

/**
 * Reads pkt-lines from `buf` until it ends or `stop(payload)` says the next bytes are not
 * pkt-lines (the raw pack after an upload-pack negotiation begins with `PACK`).
 */
export function readPktLines(buf: Buffer, start = 0, stopAtPack = false): PktReadResult {
  const lines: Array<Buffer | null> = [];
  let i = start;
  while (i + 4 <= buf.length) {
    if (stopAtPack && buf.subarray(i, i + 4).toString("latin1") === "PACK") break;
    const len = Number.parseInt(buf.subarray(i, i + 4).toString("latin1"), 16);
    if (Number.isNaN(len)) throw new Error(`bad pkt-line length at byte ${i}`);
    if (len === 0) {
      lines.push(null);
      i += 4;
      continue;
    }
    if (len < 4 || i + len > buf.length) throw new Error(`truncated pkt-line at byte ${i}`);
    lines.push(buf.subarray(i + 4, i + len));
    i += len;
  }
  return { lines, rest: i };
}

/** Payload as text without the trailing newline. */
export function lineText(line: Buffer): string {
  const s = line.toString("utf8");
  return s.endsWith("\n") ? s.slice(0, -1) : s;
}
