{{/* The chart name. */}}
{{- define "dray.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: the release name when it contains the chart name, else both. */}}
{{- define "dray.fullname" -}}
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

{{/* Labels on every object. */}}
{{- define "dray.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dray.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dray
{{- end }}

{{/* Labels that select the pods. */}}
{{- define "dray.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dray.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dray.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dray.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false: name the ServiceAccount Dray runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dray.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret holding DRAY_SECRET_KEY, and its key. */}}
{{- define "dray.secretKeySecret" -}}
{{- default (printf "%s-secret-key" (include "dray.fullname" .)) .Values.secretKey.existingSecret }}
{{- end }}

{{/* The Service the API server calls for admission. */}}
{{- define "dray.webhookService" -}}
{{- printf "%s-webhook" (include "dray.fullname" .) }}
{{- end }}

{{/* The kubernetes.io/tls Secret the admission server serves with. */}}
{{- define "dray.webhookTlsSecret" -}}
{{- default (printf "%s-webhook-tls" (include "dray.fullname" .)) .Values.webhook.tls.secretName }}
{{- end }}

{{/* The cert-manager Certificate of the webhook. */}}
{{- define "dray.webhookCertificate" -}}
{{- printf "%s-webhook" (include "dray.fullname" .) }}
{{- end }}

{{/* The plural names of every dray.dev kind (the CRDs in crds/). */}}
{{- define "dray.kinds" -}}
- analysistemplates
- clusterpromotiontasks
- credentials
- freight
- projectconfigs
- projects
- promotions
- promotiontasks
- rolebindings
- roles
- stages
- warehouses
{{- end }}

{{/* The verbs that read. */}}
{{- define "dray.readVerbs" -}}
- get
- list
- watch
{{- end }}

{{/* The environment both containers share. */}}
{{- define "dray.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: DRAY_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "dray.secretKeySecret" . }}
      key: {{ .Values.secretKey.existingSecretKey }}
# git and other tools write to $HOME; the root file system is read-only.
- name: HOME
  value: /tmp
{{- end }}
