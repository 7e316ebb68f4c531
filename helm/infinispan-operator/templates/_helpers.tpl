{{/* The chart name (nameOverride). */}}
{{- define "infinispan-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the release's namespaced objects: fullnameOverride, else the release name when it
already contains the chart name, else `<release>-<chart name>`.
*/}}
{{- define "infinispan-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The name of a cluster-scoped object of the release: `<fullname><suffix>.<release namespace>`.
A namespace name has no dot, so two releases (different namespaces, or different fullnames in
one namespace) never get the same name. Argument: (list $ "suffix").
*/}}
{{- define "infinispan-operator.clusterName" -}}
{{- $root := index . 0 }}
{{- printf "%s%s.%s" (include "infinispan-operator.fullname" $root) (index . 1) $root.Release.Namespace | trunc 253 }}
{{- end }}

{{- define "infinispan-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the release. */}}
{{- define "infinispan-operator.labels" -}}
helm.sh/chart: {{ include "infinispan-operator.chart" . }}
{{ include "infinispan-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: cluster-operator
app.kubernetes.io/part-of: infinispan
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The operator pods' selector (constant for the life of the release). */}}
{{- define "infinispan-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "infinispan-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "infinispan-operator.serviceAccountName" -}}
{{- default (include "infinispan-operator.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/*
The watched namespaces as a JSON list (`["*"]` for all), checked: a list scope needs names.
*/}}
{{- define "infinispan-operator.watchedNamespaces" -}}
{{- $scope := .Values.watch.scope }}
{{- if eq $scope "namespace" }}
{{- list .Release.Namespace | toJson }}
{{- else if eq $scope "list" }}
{{- if not .Values.watch.namespaces }}
{{- fail "watch.scope is list but watch.namespaces is empty: name the namespaces to watch (e.g. --set 'watch.namespaces={team-a,team-b}')" }}
{{- end }}
{{- .Values.watch.namespaces | uniq | toJson }}
{{- else if eq $scope "all" }}
{{- list "*" | toJson }}
{{- else }}
{{- fail (printf "watch.scope must be namespace, list or all, not %q" $scope) }}
{{- end }}
{{- end }}

{{/* CLUSTER_OPERATOR_WATCH_NAMESPACES: the list comma-separated, `*` for all. */}}
{{- define "infinispan-operator.watchNamespacesEnv" -}}
{{- include "infinispan-operator.watchedNamespaces" . | fromJsonArray | join "," }}
{{- end }}

{{/* An image reference from {repository, tag, digest}; the tag defaults to the appVersion. */}}
{{- define "infinispan-operator.image" -}}
{{- $image := index . 0 }}
{{- $root := index . 1 }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/* CLUSTER_OPERATOR_SERVER_IMAGES: `VERSION=IMAGE,...`, sorted by version. */}}
{{- define "infinispan-operator.serverImages" -}}
{{- $pairs := list }}
{{- range $version, $image := .Values.server.images }}
{{- $pairs = append $pairs (printf "%s=%s" $version $image) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/* Checks of values that the schema cannot express. */}}
{{- define "infinispan-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled: true (without a leader every replica would write)" }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "serviceAccount.create is false: set serviceAccount.name to the existing ServiceAccount the operator runs as" }}
{{- end }}
{{- end }}
