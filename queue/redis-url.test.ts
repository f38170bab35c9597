import { describe, expect, it } from "vitest";
import { ConfigError, commonSettings, loadConfig } from "./config.js";
import { errorMessage } from "./errors.js";
import { demotedPrimary, parseRedisUrl, redact, redisTargetOptions } from "./redis-url.js";

const bad = (raw: string) => {
  try {
    parseRedisUrl(raw);
  } catch (err) {
    return errorMessage(err);
  }
  throw new Error(`"${raw}" was accepted`);
};

describe("parseRedisUrl", () => {
  it("passes a plain server URL through to ioredis", () => {
    for (const url of ["redis://127.0.0.1:6379", "rediss://:p%40ss@redis.example:6380/2", "redis://r"])
      expect(parseRedisUrl(url)).toEqual({ kind: "server", url });
    expect(redisTargetOptions(parseRedisUrl("redis://h:1"))).toEqual({ url: "redis://h:1" });
  });

  it("reads sentinels, the master name, the database and both sets of credentials", () => {
    const t = parseRedisUrl(
      "redis+sentinel://app:s%3Acret@10.0.0.1:26379,sentinel-b,[::1]:26380/my%20master?db=3&sentinelPassword=sp&sentinelUsername=su",
    );
    expect(t).toEqual({
      kind: "sentinel",
      sentinels: [
        { host: "10.0.0.1", port: 26379 },
        { host: "sentinel-b", port: 26379 },
        { host: "::1", port: 26380 },
      ],
      masterName: "my master",
      db: 3,
      username: "app",
      password: "s:cret",
      sentinelUsername: "su",
      sentinelPassword: "sp",
      tls: false,
    });
    expect(redisTargetOptions(t)).toEqual({
      sentinels: [
        { host: "10.0.0.1", port: 26379 },
        { host: "sentinel-b", port: 26379 },
        { host: "::1", port: 26380 },
      ],
      name: "my master",
      db: 3,
      reconnectOnError: demotedPrimary,
      username: "app",
      password: "s:cret",
      sentinelUsername: "su",
      sentinelPassword: "sp",
    });
  });

  it("takes a password alone, the database as a path segment, and TLS from rediss+sentinel", () => {
    const t = parseRedisUrl("rediss+sentinel://:pw@h1:1,h2:2/m/5");
    expect(t).toMatchObject({ masterName: "m", db: 5, password: "pw", tls: true });
    expect(t).not.toHaveProperty("username");
    expect(redisTargetOptions(t)).toMatchObject({ tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true });
    expect(parseRedisUrl("redis+sentinel://h/m")).toEqual({
      kind: "sentinel",
      sentinels: [{ host: "h", port: 26379 }],
      masterName: "m",
      db: 0,
      tls: false,
    });
  });

  it("refuses bad input with a message saying what is wrong, never echoing the password", () => {
    expect(bad("http://h:6379")).toMatch(/^expected redis:\/\/, rediss:\/\/ or redis\+sentinel:\/\//);
    expect(bad("127.0.0.1:6379")).toMatch(/^expected redis:\/\//);
    expect(bad("redis+sentinel://h1:26379,h2:26379")).toMatch(/master name/);
    expect(bad("redis+sentinel://h1:26379/")).toMatch(/master name/);
    expect(bad("redis+sentinel:///m")).toMatch(/at least one sentinel host/);
    expect(bad("redis+sentinel://h1:26379,,h2/m")).toMatch(/host\[:port\] for each sentinel, got ""/);
    expect(bad("redis+sentinel://h1:notaport/m")).toMatch(/host\[:port\]/);
    expect(bad("redis+sentinel://h1:70000/m")).toMatch(/1-65535/);
    expect(bad("redis+sentinel://h/m?db=x")).toMatch(/db must be a database number, got "x"/);
    expect(bad("redis+sentinel://h/m/1?db=2")).toMatch(/given twice/);
    expect(bad("redis+sentinel://h/m/1/2")).toMatch(/\/<masterName>\[\/<db>\]/);
    expect(bad("redis+sentinel://h/m?sentinelPasword=x")).toMatch(/unknown parameter "sentinelPasword"/);
    expect(bad("redis+sentinel://:secret@/m")).not.toContain("secret");
    expect(bad("ftp://:secret@h")).not.toContain("secret");
  });

  it("redacts passwords for logs", () => {
    expect(redact("redis+sentinel://:pw@h1,h2/m")).toBe("redis+sentinel://:***@h1,h2/m");
    expect(redact("redis://u:pw@h:1/0")).toBe("redis://u:***@h:1/0");
    expect(redact("redis://h:1")).toBe("redis://h:1");
  });
});

describe("--redis-url", () => {
  const load = (raw: string) => loadConfig({ redisUrl: commonSettings.redisUrl }, ["--redis-url", raw], {});

  it("accepts both forms as written", () => {
    expect(load("redis+sentinel://h1:26379,h2:26379/mymaster").config.redisUrl).toBe(
      "redis+sentinel://h1:26379,h2:26379/mymaster",
    );
    expect(
      loadConfig({ redisUrl: commonSettings.redisUrl }, [], { REDIS_URL: "redis://r:1" }).config.redisUrl,
    ).toBe("redis://r:1");
  });

  it("stops start-up with one line naming the setting", () => {
    let err: unknown;
    try {
      load("redis+sentinel://h1:26379");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect(errorMessage(err)).toMatch(/^invalid setting --redis-url \(REDIS_URL\): expected the master name/);
    expect(errorMessage(err)).not.toContain("\n");
  });
});

describe("a primary demoted under a connection", () => {
  it("reconnects and resends on READONLY, and on nothing else", () => {
    expect(demotedPrimary(new Error("READONLY You can't write against a read only replica."))).toBe(2);
    expect(demotedPrimary(new Error("ERR wrong number of arguments"))).toBe(false);
    expect(demotedPrimary(new Error("LOADING Redis is loading the dataset in memory"))).toBe(false);
  });
});
