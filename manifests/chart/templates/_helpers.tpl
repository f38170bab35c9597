{{/*
The labels every object carries besides its own: kustomize's part-of, and Helm's.
Names are fixed (applygate-gateway, ...), as in manifests/: the docs, RBAC bindings and the
sidecars name them, so one release per cluster.
*/}}
{{- define "applygate.labels" -}}
app.kubernetes.io/part-of: applygate
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Labels of a component's workload and Services: (dict "ctx" $ "component" "gateway") */}}
{{- define "applygate.componentLabels" -}}
app.kubernetes.io/name: applygate
app.kubernetes.io/component: {{ .component }}
{{ include "applygate.labels" .ctx }}
{{- end }}

{{- define "applygate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- define "applygate.redisSecret" -}}
{{ .Values.redis.existingSecret | default "applygate-redis" }}
{{- end }}

{{- define "applygate.dashboardSecret" -}}
{{ .Values.dashboard.existingSecret | default "applygate-dashboard" }}
{{- end }}

{{/*
Scheduling and pulling for a pod: (dict "ctx" $ "values" .Values.gateway). Only what is set is
rendered, so the defaults add nothing to the kustomize build.
*/}}
{{- define "applygate.podPlacement" -}}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The REDIS_URL entry of a container of ours in the release namespace. */}}
{{- define "applygate.redisUrlEnv" -}}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "applygate.redisSecret" . }}
      key: url
{{- end }}

{{/*
The URL the chart writes into Secret applygate-redis, for each mode: (dict "ctx" $ "password" $pw),
the password worked out once (a generated one must be the same in every Secret). Passwords are
percent-encoded (a space as %20: userinfo is no form).
*/}}
{{- define "applygate.redisUrl" -}}
{{- $r := .ctx.Values.redis -}}
{{- $auth := "" -}}
{{- if .password }}{{ $auth = printf ":%s@" (.password | urlquery | replace "+" "%20") }}{{ end -}}
{{- if eq $r.mode "bundled" -}}
redis://{{ $auth }}applygate-redis.{{ .ctx.Release.Namespace }}.svc:6379
{{- else if eq $r.mode "external" -}}
{{ required "redis.url is required when redis.mode is external (or name redis.existingSecret)" $r.url }}
{{- else -}}
{{- $s := $r.sentinel -}}
{{- if not $s.hosts }}{{ fail "redis.sentinel.hosts is required when redis.mode is sentinel (or name redis.existingSecret)" }}{{ end -}}
{{- $query := "" -}}
{{- if $s.password }}{{ $query = printf "?sentinelPassword=%s" ($s.password | urlquery) }}{{ end -}}
{{ ternary "rediss" "redis" $s.tls }}+sentinel://{{ $auth }}{{ join "," $s.hosts }}/{{ $s.masterName }}/{{ $s.db }}{{ $query }}
{{- end -}}
{{- end }}

{{/*
The bundled Redis's password: the value, else the one in the Secret already installed (an upgrade
keeps it), else a new one.
*/}}
{{- define "applygate.redisPassword" -}}
{{- if .Values.redis.password -}}
{{ .Values.redis.password }}
{{- else -}}
{{- $current := lookup "v1" "Secret" .Release.Namespace "applygate-redis" -}}
{{- if and $current $current.data (hasKey $current.data "password") -}}
{{ index $current.data "password" | b64dec }}
{{- else -}}
{{ randAlphaNum 40 }}
{{- end -}}
{{- end -}}
{{- end }}
