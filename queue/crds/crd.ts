/** Builds each kind's CustomResourceDefinition from its zod schemas and renders it as YAML. */
import { stringify } from "yaml";
import { CATEGORY, GROUP, type KindInfo, VERSION } from "./common.js";
import { KINDS } from "./index.js";
import { type JSONSchemaProps, toStructuralSchema } from "./openapi.js";

export function crdName(info: KindInfo): string {
  return `${info.plural}.${GROUP}`;
}

export function crdFileName(info: KindInfo): string {
  return `${GROUP}_${info.plural}.yaml`;
}

/** The openAPIV3Schema of a kind: apiVersion/kind/metadata as the API server defines them, spec, status. */
export function kindSchema(info: KindInfo): JSONSchemaProps {
  return {
    type: "object",
    description: info.description,
    required: ["spec"],
    properties: {
      apiVersion: { type: "string" },
      kind: { type: "string" },
      metadata: { type: "object" },
      spec: toStructuralSchema(info.spec),
      status: toStructuralSchema(info.status),
    },
  };
}

export function buildCrd(info: KindInfo) {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: crdName(info),
      labels: { "app.kubernetes.io/name": "applygate", "app.kubernetes.io/part-of": "applygate" },
    },
    spec: {
      group: GROUP,
      names: {
        kind: info.kind,
        listKind: `${info.kind}List`,
        plural: info.plural,
        singular: info.singular,
        shortNames: info.shortNames,
        categories: [CATEGORY],
      },
      scope: info.scope ?? "Namespaced",
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: info.printerColumns,
          schema: { openAPIV3Schema: kindSchema(info) },
        },
      ],
    },
  };
}

const HEADER = "# Generated from queue/crds/ by `npm run gen:crds`. Do not edit: change the zod schema.\n";

/** Every generated file under manifests/base/crds/ (one CRD each), by file name, as the generator writes it. */
export function renderCrdFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const info of KINDS)
    files.set(crdFileName(info), HEADER + stringify(buildCrd(info), { lineWidth: 0 }));
  // Only CRDs in this folder, so `kubectl apply -f manifests/base/crds/` works; the base
  // kustomization lists these files itself.
  return files;
}
