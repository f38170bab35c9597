/**
 * The door: a write for a GitTarget naming a GitProvider in another namespace is refused unless the
 * provider admits the GitTarget's namespace (`spec.accessFrom`), by the rule the worker applies.
 */
import { describe, expect, it } from "vitest";
import { branchKey } from "../queue/contract.js";
import { branchKeys } from "../queue/keys.js";
import { fileWorld } from "../test/support/file-world.js";
import { fixtureObjects, NS, URLS, webConfigMapWrite } from "../test/support/gateway.js";
import { gatewayWorld } from "../test/support/gateway-world.js";
import { createGateway } from "./app.js";
import { type CatalogObjects, StaticCatalog } from "./catalog.js";

const TEAM = "team-b";
const TOKEN = "team-b-intake-token";
const WRITES = `/v1/targets/${TEAM}/web/writes`;
const BK = branchKey({ namespace: NS, name: "generic" }, URLS.generic, "main");

/** The fixture, plus a GitTarget in team-b naming the generic GitProvider of namespace apps. */
function objects(accessFrom?: string[]): CatalogObjects {
  const o = fixtureObjects();
  const infra = o.targets.find((t) => t.metadata.name === "infra")!;
  o.targets.push({
    ...infra,
    metadata: { name: "web", namespace: TEAM, uid: "uid-web" },
    spec: {
      ...infra.spec,
      providerRef: { name: "generic", namespace: NS },
      path: "clusters/team-b",
      intakeSecretRef: { name: "web-intake" },
    },
  });
  o.secrets.push({ namespace: TEAM, name: "web-intake", data: { token: TOKEN } });
  if (accessFrom)
    o.providers = o.providers.map((p) =>
      p.metadata.name === "generic"
        ? { ...p, spec: { ...p.spec, accessFrom: { namespaces: accessFrom } } }
        : p,
    );
  return o;
}

const write = webConfigMapWrite(TEAM, { a: "1" });

describe("intake: a GitProvider in another namespace", () => {
  const catalog = new StaticCatalog(objects());
  const w = fileWorld(() => gatewayWorld("provider-ns", createGateway, { catalog, maxWaitMs: 5000 }));

  const post = () =>
    w.gw.app.inject({
      method: "POST",
      url: WRITES,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      payload: write,
    });
  const inboxLength = () => w.redis.client.xlen(branchKeys(w.redis.prefix, BK).inbox);

  it("refuses the write at the door, queueing nothing, while the provider does not admit the namespace", async () => {
    for (const accessFrom of [undefined, ["team-c"]]) {
      catalog.set(objects(accessFrom));
      const r = await post();
      expect(r.statusCode).toBe(409);
      expect(r.json().error).toBe(
        `target not ready: ProviderNamespaceNotAllowed: GitProvider ${NS}/generic does not admit namespace ${TEAM} (spec.accessFrom.namespaces)`,
      );
    }
    expect(await inboxLength()).toBe(0);
  });

  it("accepts it once the provider lists the namespace, or every namespace", async () => {
    for (const accessFrom of [[TEAM], ["*"]]) {
      catalog.set(objects(accessFrom));
      const r = await post();
      expect(r.statusCode).toBe(202);
      expect(r.json().branchKey).toBe(BK);
    }
    expect(await inboxLength()).toBe(2);
  });
});
