{{/* vim: set filetype=mustache: */}}

{{/* The chart name, overridable. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, used as the prefix of every object name. */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Name of a component's objects: include "sluice.componentName" (dict "root" $ "component" "api") */}}
{{- define "sluice.componentName" -}}
{{- printf "%s-%s" (include "sluice.fullname" .root) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "sluice.labels" -}}
helm.sh/chart: {{ include "sluice.chart" . }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sluice
{{- end -}}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of a component's objects: (dict "root" $ "component" "api") */}}
{{- define "sluice.componentLabels" -}}
{{ include "sluice.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.componentSelectorLabels" -}}
{{ include "sluice.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image of a component: (dict "root" $ "image" .Values.api.image) */}}
{{- define "sluice.image" -}}
{{- $image := merge (dict) (.image | default dict) .root.Values.image -}}
{{- $tag := $image.tag | default .root.Chart.AppVersion -}}
{{- printf "%s:%s" $image.repository (toString $tag) -}}
{{- end -}}

{{- define "sluice.imagePullPolicy" -}}
{{- $image := merge (dict) (.image | default dict) .root.Values.image -}}
{{- $image.pullPolicy | default "IfNotPresent" -}}
{{- end -}}

{{/* Name of the Secret with DATABASE_URL and REDIS_URL. */}}
{{- define "sluice.secretName" -}}
{{- if .Values.existingSecret -}}
{{- .Values.existingSecret -}}
{{- else -}}
{{- include "sluice.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret with the token key. */}}
{{- define "sluice.tokenSecretName" -}}
{{- if .Values.auth.token.existingSecret -}}
{{- .Values.auth.token.existingSecret -}}
{{- else -}}
{{- printf "%s-token-keys" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The key of the token Secret that the pods mount. */}}
{{- define "sluice.tokenKeyName" -}}
{{- if eq .Values.auth.token.keyType "public" -}}
{{- .Values.auth.token.publicKeyName -}}
{{- else -}}
{{- .Values.auth.token.secretKeyName -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret with the data plane's Redis ACL passwords (and, chart-made, the file). */}}
{{- define "sluice.redisAclSecretName" -}}
{{- if .Values.redis.acl.existingSecret -}}
{{- .Values.redis.acl.existingSecret -}}
{{- else -}}
{{- printf "%s-redis-acl" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* A Redis URL without its credentials. */}}
{{- define "sluice.redisAddress" -}}
{{- $url := urlParse . -}}
{{- urlJoin (dict "scheme" $url.scheme "host" $url.host "path" $url.path "query" $url.query) -}}
{{- end -}}

{{/* A Redis URL with a service user, its password a $(VARIABLE) that Kubernetes expands from
     the variable defined before it: (dict "url" URL "service" "worker") */}}
{{- define "sluice.serviceRedisUrl" -}}
{{- $url := urlParse .url -}}
{{- printf "%s://sluice-%s:$(%s)@%s%s" $url.scheme .service (include "sluice.redisPasswordVariable" .service) $url.host $url.path -}}
{{- with $url.query }}?{{ . }}{{ end -}}
{{- end -}}

{{/* The variable that holds a service user's password, as `sluice redis-acl-file` reads it. */}}
{{- define "sluice.redisPasswordVariable" -}}
{{- printf "SLUICE_REDIS_%s_PASSWORD" (upper .) -}}
{{- end -}}

{{/* The Redis Sluice's components connect to with data-plane ACLs on. */}}
{{- define "sluice.componentRedis" -}}
{{- if and (not .Values.existingSecret) .Values.redis.url -}}
{{- .Values.redis.url -}}
{{- else -}}
{{- .Values.redis.dataplaneUrl -}}
{{- end -}}
{{- end -}}

{{/* SLUICE_DATAPLANE_URL: the Redis URL clients are given, without credentials. */}}
{{- define "sluice.dataplaneUrl" -}}
{{- if .Values.redis.dataplaneUrl -}}
{{- .Values.redis.dataplaneUrl -}}
{{- else if .Values.redis.url -}}
{{- include "sluice.redisAddress" .Values.redis.url -}}
{{- end -}}
{{- end -}}

{{/* Fails early on values that cannot work. */}}
{{- define "sluice.validateValues" -}}
{{- if not .Values.existingSecret -}}
{{- if not .Values.postgresql.url -}}
{{- fail "Sluice needs an external PostgreSQL: set postgresql.url (postgresql+psycopg://user:pass@host:5432/sluice) or existingSecret" -}}
{{- end -}}
{{- if not .Values.redis.url -}}
{{- fail "Sluice needs an external Redis: set redis.url (redis://host:6379/0) or existingSecret" -}}
{{- end -}}
{{- end -}}
{{- if .Values.redis.cluster -}}
{{- if and .Values.redis.url (not (regexMatch "^rediss?://[^/?#]+(/0?)?([?#].*)?$" .Values.redis.url)) -}}
{{- fail "redis.cluster: a Redis Cluster has database 0 only: end redis.url with /0 or no database" -}}
{{- end -}}
{{- if and (not .Values.existingSecret) (or .Values.components.celeryWorker .Values.components.celeryBeat) -}}
{{- if eq .Values.redis.celeryBrokerUrl .Values.redis.url -}}
{{- fail "redis.cluster: redis.celeryBrokerUrl must be a single Redis, not the cluster of redis.url" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.auth.authorization.enabled (not .Values.auth.authentication.enabled) -}}
{{- fail "auth.authorization.enabled needs auth.authentication.enabled" -}}
{{- end -}}
{{- if and .Values.auth.authentication.enabled .Values.existingSecret (not .Values.redis.dataplaneUrl) -}}
{{- fail "auth.authentication.enabled turns data-plane ACLs on: with existingSecret set redis.dataplaneUrl, the Redis address (without credentials) the components connect to with their ACL users" -}}
{{- end -}}
{{- if not (has .Values.auth.token.keyType (list "secret" "public")) -}}
{{- fail "auth.token.keyType must be \"secret\" or \"public\"" -}}
{{- end -}}
{{- if and .Values.auth.authentication.enabled (eq .Values.auth.token.keyType "public") (not .Values.auth.token.existingSecret) (not .Values.auth.token.publicKey) -}}
{{- fail "auth.token.keyType \"public\" needs auth.token.publicKey or auth.token.existingSecret" -}}
{{- end -}}
{{- end -}}

{{/* Pod annotations: checksums that roll the pods when their settings change, plus
     podAnnotations.  Empty when there are none. */}}
{{- define "sluice.podAnnotations" -}}
{{- $annotations := dict -}}
{{- if .Values.restartPodsOnConfigMapChange -}}
{{- $_ := set $annotations "checksum/config" (include (print .Template.BasePath "/configmap.yaml") . | sha256sum) -}}
{{- $_ := set $annotations "checksum/secret" (include (print .Template.BasePath "/secret.yaml") . | sha256sum) -}}
{{- if .Values.auth.authentication.enabled -}}
{{- /* The ACL Secret's generated passwords are random until it exists: sum what the values say. */}}
{{- $_ := set $annotations "checksum/redis-acl" (toJson .Values.redis.acl | sha256sum) -}}
{{- end -}}
{{- end -}}
{{- with .Values.podAnnotations -}}
{{- $annotations = merge $annotations . -}}
{{- end -}}
{{- if $annotations -}}
{{- toYaml $annotations -}}
{{- end -}}
{{- end -}}

{{/* Environment of every Sluice container: settings, connection URLs, extra variables.
     With "celery" true (the processes that use Celery) and redis.cluster, Celery's own
     CELERY_BROKER_URL and CELERY_RESULT_BACKEND, which it reads before its configuration.
     "service" (api, worker, reports) is the component's Redis ACL user when data-plane ACLs
     are on (auth.authentication.enabled): its password from the ACL Secret, then every Redis
     URL with that user and password; the admin service also gets SLUICE_DATAPLANE_URL.
     (dict "root" $ "extraEnvs" .Values.api.extraEnvs "celery" true "service" "api") */}}
{{- define "sluice.env" -}}
{{- $acl := .root.Values.auth.authentication.enabled -}}
{{- $password := include "sluice.redisPasswordVariable" .service -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" .root }}
      key: {{ .root.Values.secretKeys.databaseUrl }}
{{- if $acl }}
- name: {{ $password }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.redisAclSecretName" .root }}
      key: {{ .service }}-password
- name: REDIS_URL
  value: {{ include "sluice.serviceRedisUrl" (dict "url" (include "sluice.componentRedis" .root) "service" .service) | quote }}
{{- else }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" .root }}
      key: {{ .root.Values.secretKeys.redisUrl }}
{{- end }}
{{- if and .celery .root.Values.redis.cluster (or .root.Values.existingSecret .root.Values.redis.celeryBrokerUrl) }}
{{- range list "CELERY_BROKER_URL" "CELERY_RESULT_BACKEND" }}
- name: {{ . }}
{{- if and $acl (not $.root.Values.existingSecret) }}
  value: {{ include "sluice.serviceRedisUrl" (dict "url" $.root.Values.redis.celeryBrokerUrl "service" $.service) | quote }}
{{- else }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sluice.secretName" $.root }}
      key: {{ $.root.Values.secretKeys.celeryBrokerUrl }}
      {{- if $.root.Values.existingSecret }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (eq .service "api") (or $acl .root.Values.redis.dataplaneUrl) }}
- name: SLUICE_DATAPLANE_URL
  value: {{ include "sluice.dataplaneUrl" .root | quote }}
{{- end }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- with .extraEnvs }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sluice.envFrom" -}}
- configMapRef:
    name: {{ include "sluice.fullname" . }}
{{- end -}}

{{/* Writable folders for a read-only root file system, plus the token key. */}}
{{- define "sluice.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: home
  mountPath: /home/sluice
- name: data
  mountPath: /var/lib/sluice
{{- if .lake }}
- name: lake
  mountPath: /var/lib/sluice/lake
{{- end }}
{{- if .root.Values.auth.authentication.enabled }}
- name: token-keys
  mountPath: {{ .root.Values.auth.token.mountPath }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "sluice.volumes" -}}
- name: tmp
  emptyDir: {}
- name: home
  emptyDir: {}
- name: data
  emptyDir: {}
{{- if .lake }}
- name: lake
{{- $persistence := .root.Values.lake.persistence }}
{{- if $persistence.enabled }}
  persistentVolumeClaim:
    claimName: {{ $persistence.existingClaim | default (printf "%s-lake" (include "sluice.fullname" .root)) }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- end }}
{{- if .root.Values.auth.authentication.enabled }}
- name: token-keys
  secret:
    secretName: {{ include "sluice.tokenSecretName" .root }}
    defaultMode: 0440
    items:
      - key: {{ include "sluice.tokenKeyName" .root }}
        path: {{ include "sluice.tokenKeyName" .root }}
{{- end }}
{{- end -}}

{{/* Scheduling of a component: (dict "root" $ "values" .Values.api "component" "api") */}}
{{- define "sluice.scheduling" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .values.affinity }}
affinity:
  {{- toYaml .values.affinity | nindent 2 }}
{{- else if .values.antiAffinity }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "sluice.componentSelectorLabels" (dict "root" .root "component" .component) | nindent 14 }}
{{- end }}
{{- end -}}

{{/* An HTTP probe: (dict "probe" .Values.api.probe.liveness "port" "http") */}}
{{- define "sluice.httpProbe" -}}
httpGet:
  path: {{ .probe.path }}
  port: {{ .port }}
initialDelaySeconds: {{ .probe.initialDelaySeconds }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{- define "sluice.execProbe" -}}
exec:
  command:
    {{- toYaml .command | nindent 4 }}
initialDelaySeconds: {{ .probe.initialDelaySeconds }}
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{/* Pod-level fields shared by every Sluice pod. */}}
{{- define "sluice.podCommon" -}}
serviceAccountName: {{ include "sluice.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}
