/**
 * Minimal JSON schemas for the Kubernetes built-in kinds (and Prometheus Operator kinds) our
 * manifests use. They are closed (`additionalProperties: false`) where a misspelt field would
 * otherwise be silently dropped by the API server, and require what the API server requires.
 * Written from the Kubernetes API reference for apps/v1, core/v1, policy/v1,
 * networking.k8s.io/v1, rbac.authorization.k8s.io/v1, apiextensions.k8s.io/v1,
 * admissionregistration.k8s.io/v1 and monitoring.coreos.com/v1.
 */
type Schema = Record<string, unknown>;

const str: Schema = { type: "string" };
const int: Schema = { type: "integer" };
const bool: Schema = { type: "boolean" };
const strMap: Schema = { type: "object", additionalProperties: str };
const strList: Schema = { type: "array", items: str };
const intOrString: Schema = { anyOf: [int, str] };
const quantity: Schema = { anyOf: [{ type: "string", pattern: "^[0-9.]+(m|Ki|Mi|Gi|Ti|k|M|G|T)?$" }, int] };

function closed(properties: Record<string, Schema>, required: string[] = []): Schema {
  return { type: "object", properties, required, additionalProperties: false };
}

const metadata = closed(
  {
    name: { type: "string", pattern: "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" },
    namespace: str,
    labels: strMap,
    annotations: strMap,
  },
  ["name"],
);
const templateMetadata = closed({ labels: strMap, annotations: strMap });

function kind(apiVersion: string, k: string, body: Record<string, Schema>, required: string[] = []): Schema {
  return closed({ apiVersion: { const: apiVersion }, kind: { const: k }, metadata, ...body }, [
    "apiVersion",
    "kind",
    "metadata",
    ...required,
  ]);
}

const labelSelector = closed({
  matchLabels: strMap,
  matchExpressions: {
    type: "array",
    items: closed(
      { key: str, operator: { enum: ["In", "NotIn", "Exists", "DoesNotExist"] }, values: strList },
      ["key", "operator"],
    ),
  },
});

/** A ValidatingAdmissionPolicy's (or binding's) matchResources. */
const namedRule = closed({
  apiGroups: strList,
  apiVersions: strList,
  operations: { type: "array", items: { enum: ["*", "CREATE", "UPDATE", "DELETE", "CONNECT"] } },
  resources: strList,
  resourceNames: strList,
  scope: { enum: ["*", "Cluster", "Namespaced"] },
});
const matchResources = closed({
  namespaceSelector: labelSelector,
  objectSelector: labelSelector,
  resourceRules: { type: "array", items: namedRule },
  excludeResourceRules: { type: "array", items: namedRule },
  matchPolicy: { enum: ["Exact", "Equivalent"] },
});

const networkPolicyPorts: Schema = {
  type: "array",
  items: closed({ port: intOrString, protocol: { enum: ["TCP", "UDP"] } }),
};

const keyRef = closed({ name: str, key: str, optional: bool }, ["key"]);
const envVar = closed(
  {
    name: str,
    value: str,
    valueFrom: closed({
      secretKeyRef: keyRef,
      configMapKeyRef: keyRef,
      fieldRef: closed({ fieldPath: str, apiVersion: str }, ["fieldPath"]),
    }),
  },
  ["name"],
);

const probe = closed({
  httpGet: closed({ path: str, port: intOrString, scheme: { enum: ["HTTP", "HTTPS"] } }, ["port"]),
  tcpSocket: closed({ port: intOrString }, ["port"]),
  exec: closed({ command: strList }),
  initialDelaySeconds: int,
  periodSeconds: int,
  timeoutSeconds: int,
  failureThreshold: int,
  successThreshold: int,
});

const resources = closed({
  requests: { type: "object", additionalProperties: quantity },
  limits: { type: "object", additionalProperties: quantity },
});

const seccomp = closed(
  { type: { enum: ["RuntimeDefault", "Localhost", "Unconfined"] }, localhostProfile: str },
  ["type"],
);

const containerSecurityContext = closed({
  runAsNonRoot: bool,
  runAsUser: int,
  runAsGroup: int,
  allowPrivilegeEscalation: bool,
  readOnlyRootFilesystem: bool,
  privileged: bool,
  capabilities: closed({ add: strList, drop: strList }),
  seccompProfile: seccomp,
});

const container = closed(
  {
    name: str,
    image: str,
    imagePullPolicy: { enum: ["Always", "IfNotPresent", "Never"] },
    command: strList,
    args: strList,
    ports: {
      type: "array",
      items: closed(
        {
          name: { type: "string", maxLength: 15, pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" },
          containerPort: int,
          protocol: { enum: ["TCP", "UDP", "SCTP"] },
        },
        ["containerPort"],
      ),
    },
    env: { type: "array", items: envVar },
    startupProbe: probe,
    livenessProbe: probe,
    readinessProbe: probe,
    resources,
    securityContext: containerSecurityContext,
    volumeMounts: {
      type: "array",
      items: closed({ name: str, mountPath: str, readOnly: bool, subPath: str }, ["name", "mountPath"]),
    },
  },
  ["name", "image"],
);

const volume = closed(
  {
    name: str,
    emptyDir: closed({ medium: { enum: ["", "Memory"] }, sizeLimit: quantity }),
    configMap: closed({ name: str, defaultMode: int }),
    secret: closed({ secretName: str, defaultMode: int }),
    persistentVolumeClaim: closed({ claimName: str }, ["claimName"]),
  },
  ["name"],
);

const podSpec = closed(
  {
    serviceAccountName: str,
    automountServiceAccountToken: bool,
    enableServiceLinks: bool,
    terminationGracePeriodSeconds: int,
    securityContext: closed({
      runAsNonRoot: bool,
      runAsUser: int,
      runAsGroup: int,
      fsGroup: int,
      seccompProfile: seccomp,
    }),
    topologySpreadConstraints: {
      type: "array",
      items: closed(
        {
          maxSkew: { type: "integer", minimum: 1 },
          topologyKey: str,
          whenUnsatisfiable: { enum: ["DoNotSchedule", "ScheduleAnyway"] },
          labelSelector,
        },
        ["maxSkew", "topologyKey", "whenUnsatisfiable"],
      ),
    },
    containers: { type: "array", minItems: 1, items: container },
    volumes: { type: "array", items: volume },
    // Placement and pulling, which the Helm chart's values set.
    imagePullSecrets: { type: "array", items: closed({ name: str }, ["name"]) },
    priorityClassName: str,
    nodeSelector: strMap,
    tolerations: {
      type: "array",
      items: closed({
        key: str,
        operator: { enum: ["Exists", "Equal"] },
        value: str,
        effect: { enum: ["NoSchedule", "PreferNoSchedule", "NoExecute"] },
        tolerationSeconds: int,
      }),
    },
    affinity: closed({
      nodeAffinity: { type: "object" },
      podAffinity: { type: "object" },
      podAntiAffinity: { type: "object" },
    }),
  },
  ["containers"],
);

const podTemplate = closed({ metadata: templateMetadata, spec: podSpec }, ["spec"]);

const policyRule = closed(
  {
    apiGroups: strList,
    resources: strList,
    verbs: { type: "array", minItems: 1, items: str },
    resourceNames: strList,
  },
  ["verbs"],
);
const roleRef = closed(
  { apiGroup: { const: "rbac.authorization.k8s.io" }, kind: { enum: ["Role", "ClusterRole"] }, name: str },
  ["apiGroup", "kind", "name"],
);
const subject = closed(
  { kind: { enum: ["ServiceAccount", "User", "Group"] }, name: str, namespace: str, apiGroup: str },
  ["kind", "name"],
);

const monitorEndpoint = closed({ port: str, path: str, interval: str, scheme: str });

export const BUILTIN_SCHEMAS: Record<string, Schema> = {
  "v1/Namespace": kind("v1", "Namespace", {}),
  "v1/ServiceAccount": kind("v1", "ServiceAccount", { automountServiceAccountToken: bool }),
  "v1/ConfigMap": kind("v1", "ConfigMap", { data: strMap }),
  // The Secrets the Helm chart makes (Redis URL and password, dashboard credentials).
  "v1/Secret": kind("v1", "Secret", {
    type: { enum: ["Opaque"] },
    data: { type: "object", additionalProperties: { type: "string", pattern: "^[A-Za-z0-9+/]*={0,2}$" } },
  }),
  "v1/Service": kind(
    "v1",
    "Service",
    {
      spec: closed(
        {
          type: { enum: ["ClusterIP", "NodePort", "LoadBalancer"] },
          clusterIP: str,
          selector: strMap,
          ports: {
            type: "array",
            minItems: 1,
            items: closed(
              { name: str, port: int, targetPort: intOrString, protocol: { enum: ["TCP", "UDP"] } },
              ["port"],
            ),
          },
        },
        ["ports"],
      ),
    },
    ["spec"],
  ),
  "apps/v1/Deployment": kind(
    "apps/v1",
    "Deployment",
    {
      spec: closed(
        {
          replicas: int,
          revisionHistoryLimit: int,
          selector: labelSelector,
          strategy: closed({
            type: { enum: ["RollingUpdate", "Recreate"] },
            rollingUpdate: closed({ maxUnavailable: intOrString, maxSurge: intOrString }),
          }),
          template: podTemplate,
        },
        ["selector", "template"],
      ),
    },
    ["spec"],
  ),
  "apps/v1/StatefulSet": kind(
    "apps/v1",
    "StatefulSet",
    {
      spec: closed(
        {
          serviceName: str,
          replicas: int,
          selector: labelSelector,
          template: podTemplate,
          volumeClaimTemplates: {
            type: "array",
            items: closed(
              {
                metadata: closed({ name: str }, ["name"]),
                spec: closed(
                  {
                    accessModes: strList,
                    storageClassName: str,
                    resources: closed({ requests: closed({ storage: quantity }, ["storage"]) }, ["requests"]),
                  },
                  ["accessModes", "resources"],
                ),
              },
              ["metadata", "spec"],
            ),
          },
        },
        ["selector", "template", "serviceName"],
      ),
    },
    ["spec"],
  ),
  "policy/v1/PodDisruptionBudget": kind(
    "policy/v1",
    "PodDisruptionBudget",
    {
      spec: {
        ...closed({ minAvailable: intOrString, maxUnavailable: intOrString, selector: labelSelector }, [
          "selector",
        ]),
        oneOf: [{ required: ["minAvailable"] }, { required: ["maxUnavailable"] }],
      },
    },
    ["spec"],
  ),
  "networking.k8s.io/v1/NetworkPolicy": kind(
    "networking.k8s.io/v1",
    "NetworkPolicy",
    {
      spec: closed(
        {
          podSelector: labelSelector,
          policyTypes: { type: "array", items: { enum: ["Ingress", "Egress"] } },
          ingress: {
            type: "array",
            items: closed({
              from: {
                type: "array",
                items: closed({ namespaceSelector: labelSelector, podSelector: labelSelector }),
              },
              ports: networkPolicyPorts,
            }),
          },
          egress: {
            type: "array",
            items: closed({
              to: {
                type: "array",
                items: closed({
                  namespaceSelector: labelSelector,
                  podSelector: labelSelector,
                  ipBlock: closed({ cidr: str, except: strList }, ["cidr"]),
                }),
              },
              ports: networkPolicyPorts,
            }),
          },
        },
        ["podSelector"],
      ),
    },
    ["spec"],
  ),
  "rbac.authorization.k8s.io/v1/ClusterRole": kind("rbac.authorization.k8s.io/v1", "ClusterRole", {
    rules: { type: "array", items: policyRule },
    aggregationRule: closed({
      clusterRoleSelectors: {
        type: "array",
        items: closed({ matchLabels: { type: "object", additionalProperties: str } }),
      },
    }),
  }),
  "rbac.authorization.k8s.io/v1/Role": kind("rbac.authorization.k8s.io/v1", "Role", {
    rules: { type: "array", items: policyRule },
  }),
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": kind(
    "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding",
    { roleRef, subjects: { type: "array", items: subject } },
    ["roleRef"],
  ),
  "rbac.authorization.k8s.io/v1/RoleBinding": kind(
    "rbac.authorization.k8s.io/v1",
    "RoleBinding",
    { roleRef, subjects: { type: "array", items: subject } },
    ["roleRef"],
  ),
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": kind(
    "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicy",
    {
      spec: closed({
        failurePolicy: { enum: ["Fail", "Ignore"] },
        matchConstraints: matchResources,
        paramKind: closed({ apiVersion: str, kind: str }),
        matchConditions: {
          type: "array",
          items: closed({ name: str, expression: str }, ["name", "expression"]),
        },
        variables: { type: "array", items: closed({ name: str, expression: str }, ["name", "expression"]) },
        validations: {
          type: "array",
          items: closed(
            {
              expression: str,
              message: str,
              messageExpression: str,
              reason: { enum: ["Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"] },
            },
            ["expression"],
          ),
        },
        auditAnnotations: {
          type: "array",
          items: closed({ key: str, valueExpression: str }, ["key", "valueExpression"]),
        },
      }),
    },
    ["spec"],
  ),
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": kind(
    "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicyBinding",
    {
      spec: closed(
        {
          policyName: str,
          paramRef: closed({
            name: str,
            namespace: str,
            selector: labelSelector,
            parameterNotFoundAction: str,
          }),
          matchResources,
          validationActions: { type: "array", items: { enum: ["Deny", "Warn", "Audit"] }, minItems: 1 },
        },
        ["policyName", "validationActions"],
      ),
    },
    ["spec"],
  ),
  // The CRD's own openAPIV3Schema is checked separately (structural, converted from zod).
  "apiextensions.k8s.io/v1/CustomResourceDefinition": kind(
    "apiextensions.k8s.io/v1",
    "CustomResourceDefinition",
    {
      spec: closed(
        {
          group: str,
          names: closed(
            {
              kind: str,
              listKind: str,
              plural: str,
              singular: str,
              shortNames: strList,
              categories: strList,
            },
            ["kind", "plural"],
          ),
          scope: { enum: ["Namespaced", "Cluster"] },
          versions: {
            type: "array",
            minItems: 1,
            items: closed(
              {
                name: str,
                served: bool,
                storage: bool,
                subresources: closed({ status: closed({}) }),
                additionalPrinterColumns: {
                  type: "array",
                  items: closed(
                    {
                      name: str,
                      type: { enum: ["string", "integer", "number", "boolean", "date"] },
                      jsonPath: str,
                      description: str,
                      priority: int,
                    },
                    ["name", "type", "jsonPath"],
                  ),
                },
                schema: closed({ openAPIV3Schema: { type: "object" } }, ["openAPIV3Schema"]),
              },
              ["name", "served", "storage", "schema"],
            ),
          },
        },
        ["group", "names", "scope", "versions"],
      ),
    },
    ["spec"],
  ),
  "monitoring.coreos.com/v1/ServiceMonitor": kind(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    {
      spec: closed(
        {
          selector: labelSelector,
          namespaceSelector: closed({ matchNames: strList, any: bool }),
          endpoints: { type: "array", minItems: 1, items: monitorEndpoint },
        },
        ["selector", "endpoints"],
      ),
    },
    ["spec"],
  ),
  "monitoring.coreos.com/v1/PodMonitor": kind(
    "monitoring.coreos.com/v1",
    "PodMonitor",
    {
      spec: closed(
        {
          selector: labelSelector,
          namespaceSelector: closed({ matchNames: strList, any: bool }),
          podMetricsEndpoints: { type: "array", minItems: 1, items: monitorEndpoint },
        },
        ["selector", "podMetricsEndpoints"],
      ),
    },
    ["spec"],
  ),
  "monitoring.coreos.com/v1/PrometheusRule": kind(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    {
      spec: closed(
        {
          groups: {
            type: "array",
            minItems: 1,
            items: closed(
              {
                name: str,
                interval: str,
                rules: {
                  type: "array",
                  minItems: 1,
                  items: closed(
                    {
                      alert: str,
                      record: str,
                      expr: { type: "string", minLength: 1 },
                      for: { type: "string", pattern: "^[0-9]+(ms|s|m|h|d|w|y)$" },
                      labels: strMap,
                      annotations: strMap,
                    },
                    ["expr"],
                  ),
                },
              },
              ["name", "rules"],
            ),
          },
        },
        ["groups"],
      ),
    },
    ["spec"],
  ),
};

export function schemaKey(apiVersion: string, kind: string): string {
  return `${apiVersion}/${kind}`;
}
