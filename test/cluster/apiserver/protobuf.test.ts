/** Protobuf request bodies, as the machine's kubectl (v1.32) sent them for `kubectl create …`. */
import { describe, expect, it } from "vitest";
import { ApiError } from "./errors.js";
import { decodeProtobuf, isProtobuf } from "./protobuf.js";

const sent = {
  namespace:
    "6b3873000a0f0a02763112094e616d657370616365121e0a160a067465616d2d6112001a0022002a0032003800420012001a020a001a002200",
  secret:
    "6b3873000a0c0a027631120653656372657412320a180a02733112001a067465616d2d6122002a00320038004200120c0a05746f6b656e120361626312060a01751201781a001a002200",
  configMap:
    "6b3873000a0f0a0276311209436f6e6669674d617012220a180a02633112001a067465616d2d6122002a0032003800420012060a01611201621a002200",
  serviceAccount:
    "6b3873000a140a027631120e536572766963654163636f756e74121b0a190a03626f7412001a067465616d2d6122002a003200380042001a002200",
  roleBinding:
    "6b3873000a2b0a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f7631120b526f6c6542696e64696e67126b0a180a02726212001a067465616d2d6122002a00320038004200121f0a0e536572766963654163636f756e7412001a03626f7422067465616d2d611a2e0a19726261632e617574686f72697a6174696f6e2e6b38732e696f120b436c7573746572526f6c651a04766965771a002200",
};
const decode = (hex: string) => decodeProtobuf(Buffer.from(hex, "hex"));

describe("protobuf request bodies", () => {
  it("recognises the media type with or without parameters", () => {
    expect(isProtobuf("application/vnd.kubernetes.protobuf")).toBe(true);
    expect(isProtobuf("application/vnd.kubernetes.protobuf; charset=utf-8")).toBe(true);
    expect(isProtobuf("application/json")).toBe(false);
    expect(isProtobuf(undefined)).toBe(false);
  });

  it("decodes `kubectl create namespace` into the object JSON would carry (zero values dropped)", () => {
    expect(decode(sent.namespace)).toEqual({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "team-a" },
    });
  });

  it("decodes a generic Secret: data bytes become base64, the type is kept", () => {
    expect(decode(sent.secret)).toEqual({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s1", namespace: "team-a" },
      data: { token: Buffer.from("abc").toString("base64"), u: Buffer.from("x").toString("base64") },
    });
  });

  it("decodes a ConfigMap, a ServiceAccount and a RoleBinding", () => {
    expect(decode(sent.configMap)).toEqual({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c1", namespace: "team-a" },
      data: { a: "b" },
    });
    expect(decode(sent.serviceAccount)).toEqual({
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "bot", namespace: "team-a" },
    });
    expect(decode(sent.roleBinding)).toEqual({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "rb", namespace: "team-a" },
      subjects: [{ kind: "ServiceAccount", name: "bot", namespace: "team-a" }],
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "view" },
    });
  });

  it("refuses a body without the magic, a kind it cannot decode, and a field it does not know", () => {
    const status = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e instanceof ApiError ? `${e.code} ${e.message}` : String(e);
      }
      return "no error";
    };
    expect(status(() => decodeProtobuf(Buffer.from("{}")))).toMatch(/^400 .*magic/);
    // Unknown{typeMeta{apiVersion "v1", kind "Pod"}}
    const pod = Buffer.concat([Buffer.from("k8s\0", "latin1"), Buffer.from("0a090a0276311203506f64", "hex")]);
    expect(status(() => decodeProtobuf(pod))).toMatch(/^415 .*v1 Pod/);
    // a ConfigMap whose raw message carries field 9 (unknown to the ConfigMap message)
    const odd = Buffer.concat([
      Buffer.from("k8s\0", "latin1"),
      Buffer.from("0a0f0a0276311209436f6e6669674d6170", "hex"),
      Buffer.from("12024801", "hex"),
    ]);
    expect(status(() => decodeProtobuf(odd))).toMatch(/^400 .*field 9/);
  });
});
