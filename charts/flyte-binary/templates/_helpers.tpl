{{/* The chart's name. */}}
{{- define "flyte-binary.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name. */}}
{{- define "flyte-binary.fullname" -}}
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

{{/* Labels that select the manager's Pods. */}}
{{- define "flyte-binary.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flyte-binary.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "flyte-binary.labels" -}}
{{ include "flyte-binary.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Annotations of every object (with the object's own, given as the argument "extra"). */}}
{{- define "flyte-binary.annotations" -}}
{{- $a := merge (deepCopy (default dict .extra)) (deepCopy (default dict .root.Values.commonAnnotations)) -}}
{{- with $a }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "flyte-binary.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flyte-binary.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "flyte-binary.httpServiceName" -}}
{{- printf "%s-http" (include "flyte-binary.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flyte-binary.configMapName" -}}
{{- printf "%s-config" (include "flyte-binary.fullname" .) -}}
{{- end -}}

{{/* The Secret the manager reads: the chart's, or configuration.externalSecretRef. */}}
{{- define "flyte-binary.secretName" -}}
{{- default (printf "%s-config-secret" (include "flyte-binary.fullname" .)) .Values.configuration.externalSecretRef -}}
{{- end -}}

{{/* The namespace of TaskActions and task Pods. */}}
{{- define "flyte-binary.executorNamespace" -}}
{{- default .Release.Namespace .Values.configuration.executor.namespace -}}
{{- end -}}

{{- define "flyte-binary.httpPort" -}}
{{- default 8090 .Values.service.ports.http -}}
{{- end -}}

{{- define "flyte-binary.image" -}}
{{- printf "%s:%s" .Values.deployment.image.repository (default .Chart.AppVersion .Values.deployment.image.tag) -}}
{{- end -}}

{{- define "flyte-binary.copilotImage" -}}
{{- $c := index .Values.configuration "co-pilot" "image" -}}
{{- printf "%s:%s" (default .Values.deployment.image.repository $c.repository) (default (default .Chart.AppVersion .Values.deployment.image.tag) $c.tag) -}}
{{- end -}}

{{- define "flyte-binary.usePostgres" -}}
{{- if .Values.configuration.database.postgres.host }}true{{ end -}}
{{- end -}}

{{/* The external URL clients use, from the Ingress host. */}}
{{- define "flyte-binary.externalURL" -}}
{{- if and .Values.ingress.create .Values.ingress.host -}}
{{- printf "%s://%s" (ternary "https" "http" (gt (len (default .Values.ingress.tls .Values.ingress.httpTls)) 0)) .Values.ingress.host -}}
{{- end -}}
{{- end -}}

{{/* The database.dsn of PostgreSQL, with the password: only ever rendered into the Secret. */}}
{{- define "flyte-binary.postgresDSN" -}}
{{- $p := .Values.configuration.database.postgres -}}
{{- $opts := regexReplaceAll "[ ]+" (trim $p.options) "&" -}}
{{- $user := urlquery $p.username -}}
{{- if $p.password }}{{ $user = printf "%s:%s" $user (urlquery $p.password) }}{{ end -}}
{{- printf "postgres://%s@%s:%v/%s%s" $user $p.host $p.port $p.dbname (ternary (printf "?%s" $opts) "" (ne $opts "")) -}}
{{- end -}}

{{/* The storage URL: s3://bucket (the endpoint, region and keys are storage.s3.*). */}}
{{- define "flyte-binary.storageURL" -}}
{{- printf "s3://%s" .Values.configuration.storage.metadataContainer -}}
{{- end -}}

{{/* The S3 endpoint as a URL: endpoint as given when it has a scheme, else http:// with
disableSSL and https:// without. "" for AWS. */}}
{{- define "flyte-binary.s3Endpoint" -}}
{{- $s3 := .Values.configuration.storage.providerConfig.s3 -}}
{{- if $s3.endpoint -}}
{{- if contains "://" $s3.endpoint }}{{ $s3.endpoint }}{{ else }}{{ ternary "http://" "https://" (not (not $s3.disableSSL)) }}{{ $s3.endpoint }}{{ end -}}
{{- end -}}
{{- end -}}

{{/*
The secrets key: configuration.secrets.key, else the one the chart's Secret already holds (a new
key would make every stored secret unreadable), else a new random one, remembered in .Values for
the rest of this render so that the Secret and the Pods' checksum agree.
*/}}
{{- define "flyte-binary.secretsKey" -}}
{{- $s := .Values.configuration.secrets -}}
{{- if not $s.key -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "flyte-binary.secretName" .) -}}
{{- $file := "" -}}
{{- if and $existing $existing.data -}}{{- $file = index $existing.data "014-secrets-key.yaml" | default "" -}}{{- end -}}
{{- if $file -}}
{{- $_ := set $s "key" (index (fromYaml (b64dec $file)) "secrets" "key") -}}
{{- else -}}
{{- $_ := set $s "key" (randBytes 32) -}}
{{- end -}}
{{- end -}}
{{- $s.key -}}
{{- end -}}

{{/* "true" when the API port serves https: configuration.tls.enabled, or by default when no
Ingress terminates TLS in front. */}}
{{- define "flyte-binary.tls" -}}
{{- $e := .Values.configuration.tls.enabled -}}
{{- if kindIs "bool" $e -}}{{ if $e }}true{{ end }}
{{- else if not .Values.ingress.create }}true
{{- end -}}
{{- end -}}

{{/*
The bootstrap admin key, "<key id>:<secret>": the one the chart's Secret already holds (a new one
on every upgrade would break the clients given the first), else a new random one, remembered in
.Values for the rest of this render so that the Secret and the Pods' checksum agree.
*/}}
{{- define "flyte-binary.bootstrapKey" -}}
{{- $b := .Values.configuration.auth.bootstrapKey -}}
{{- if not $b.generated -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "flyte-binary.secretName" .) -}}
{{- $file := "" -}}
{{- if and $existing $existing.data -}}{{- $file = index $existing.data "016-auth-bootstrap.yaml" | default "" -}}{{- end -}}
{{- if $file -}}
{{- $_ := set $b "generated" (index (fromYaml (b64dec $file)) "auth" "bootstrapKey") -}}
{{- else -}}
{{- $_ := set $b "generated" (printf "fmk%s:%s" (randAlphaNum 20 | lower) (randAlphaNum 43)) -}}
{{- end -}}
{{- end -}}
{{- $b.generated -}}
{{- end -}}

{{/* The bootstrap key in the SDK's FLYTE_API_KEY format: base64("<host>:<key id>:<secret>:None"). */}}
{{- define "flyte-binary.apiKey" -}}
{{- $b := .Values.configuration.auth.bootstrapKey -}}
{{- $host := $b.endpoint | default (and .Values.ingress.create .Values.ingress.host) | default "localhost" -}}
{{- printf "%s:%s:None" $host (include "flyte-binary.bootstrapKey" .) | b64enc -}}
{{- end -}}
