import { describe, expect, it } from "vitest";
import { refusedAddress, refusedUrl } from "./address.js";

describe("refusedAddress: the ranges a WebhookClaim may not reach", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["169.254.169.254", "link-local"],
    ["169.254.0.1", "link-local"],
    ["100.100.100.200", "metadata"],
    ["0.0.0.0", "this network"],
    ["::1", "loopback"],
    ["[::1]", "loopback"],
    ["::", "unspecified"],
    ["fe80::1", "link-local"],
    ["febf::1", "link-local"],
    ["fd00:ec2::254", "metadata"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:169.254.169.254", "link-local"],
  ])("refuses %s (%s)", (address, why) => {
    expect(refusedAddress(address)).toContain(why);
  });

  it.each([
    "10.0.0.5",
    "192.168.1.10",
    "172.16.0.1",
    "8.8.8.8",
    "100.100.100.201",
    "fd00:ec2::253",
    "fec0::1",
    "2001:db8::1",
  ])("allows %s", (address) => {
    expect(refusedAddress(address)).toBeUndefined();
  });

  it("refuses what is not an address", () => {
    expect(refusedAddress("metadata.google.internal")).toContain("not an IP address");
  });
});

describe("refusedUrl", () => {
  it("requires https unless insecure", () => {
    expect(refusedUrl("http://deploy.example/x", { insecure: false })).toContain("insecure");
    expect(refusedUrl("http://deploy.example/x", { insecure: true })).toBeUndefined();
    expect(refusedUrl("https://deploy.example/x", { insecure: false })).toBeUndefined();
  });
  it("refuses other schemes and credentials in the URL", () => {
    expect(refusedUrl("file:///etc/passwd", { insecure: true })).toContain("not http");
    expect(refusedUrl("https://u:p@deploy.example/x", { insecure: false })).toContain("credentials");
    expect(refusedUrl("not a url", { insecure: true })).toContain("not a URL");
  });
});
