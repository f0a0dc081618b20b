{{- define "vigil.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vigil.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vigil.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vigil.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vigil.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "vigil.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The Secret holding the tokens: the one named, or the chart's own. */}}
{{- define "vigil.authSecret" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else -}}
{{- printf "%s-auth" (include "vigil.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The key of the token Prometheus scrapes with: the one named, else the auth Secret's admin token; empty when there is none. */}}
{{- define "vigil.metricsTokenKey" -}}
{{- .Values.metrics.serviceMonitor.tokenKey | default (ternary .Values.auth.adminTokenKey "admin-token" (not (empty .Values.auth.existingSecret))) -}}
{{- end -}}

{{/* The values checked once, so a bad combination fails before anything renders. */}}
{{- define "vigil.validate" -}}
{{- if not (has .Values.database.type (list "sqlite" "postgres")) -}}
{{- fail (printf "database.type %q: use sqlite or postgres" .Values.database.type) -}}
{{- end -}}
{{- if and (eq .Values.database.type "postgres") (not .Values.database.postgres.existingSecret) -}}
{{- fail "database.type postgres needs database.postgres.existingSecret: a Secret holding the database URL" -}}
{{- end -}}
{{- if and (not .Values.auth.existingSecret) (not .Values.auth.adminToken) -}}
{{- fail "vigil listens beyond loopback here, so it needs tokens: set auth.existingSecret (a Secret with an admin token and/or a credentials file) or auth.adminToken" -}}
{{- end -}}
{{- if and .Values.auth.existingSecret .Values.auth.adminToken -}}
{{- fail "set auth.existingSecret or auth.adminToken, not both" -}}
{{- end -}}
{{- if and .Values.auth.adminToken (lt (len .Values.auth.adminToken) 16) -}}
{{- fail "auth.adminToken: tokens must be at least 16 characters" -}}
{{- end -}}
{{- if and .Values.auth.existingSecret (not .Values.auth.adminTokenKey) (not .Values.auth.configKey) -}}
{{- fail "auth.existingSecret: name the key of an admin token (auth.adminTokenKey), of a credentials file (auth.configKey), or both" -}}
{{- end -}}
{{- /* With tokens from a credentials file alone there is no admin token to scrape with, and /metrics answers 401: every gateway would look down. */ -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not (include "vigil.metricsTokenKey" .)) (not (has "--open-metrics" .Values.extraArgs)) -}}
{{- fail "metrics.serviceMonitor.enabled: auth.existingSecret has no admin token (auth.adminTokenKey is empty), so /metrics would refuse the scrape: set metrics.serviceMonitor.tokenSecret and tokenKey to an admin or operator token, or add --open-metrics to extraArgs" -}}
{{- end -}}
{{- end -}}

{{/* The pod, the same for one gateway on SQLite and several on PostgreSQL. */}}
{{- define "vigil.podTemplate" -}}
metadata:
  labels:
    {{- include "vigil.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or (not .Values.auth.existingSecret) .Values.podAnnotations }}
  annotations:
    {{- if not .Values.auth.existingSecret }}
    {{- /* a changed token restarts the pods */}}
    checksum/auth: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
    {{- end }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: vigil
      image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        {{- with .Values.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        - name: VIGIL_ADDR
          value: "0.0.0.0:{{ .Values.service.port }}"
        {{- if eq .Values.database.type "postgres" }}
        - name: VIGIL_DB
          valueFrom:
            secretKeyRef:
              name: {{ .Values.database.postgres.existingSecret }}
              key: {{ .Values.database.postgres.urlKey }}
        {{- else }}
        - name: VIGIL_DB
          value: /var/lib/vigil/vigil.db
        - name: VIGIL_SYNCHRONOUS
          value: {{ .Values.database.sqlite.synchronous | quote }}
        {{- end }}
        {{- if or (not .Values.auth.existingSecret) .Values.auth.adminTokenKey }}
        - name: VIGIL_ADMIN_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ include "vigil.authSecret" . }}
              key: {{ if .Values.auth.existingSecret }}{{ .Values.auth.adminTokenKey }}{{ else }}admin-token{{ end }}
        {{- end }}
        {{- if and .Values.auth.existingSecret .Values.auth.configKey }}
        - name: VIGIL_CONFIG
          value: /etc/vigil/{{ .Values.auth.configKey }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: http
          containerPort: {{ .Values.service.port }}
          protocol: TCP
      livenessProbe:
        {{- toYaml .Values.livenessProbe | nindent 8 }}
      readinessProbe:
        {{- toYaml .Values.readinessProbe | nindent 8 }}
      startupProbe:
        {{- toYaml .Values.startupProbe | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if eq .Values.database.type "sqlite" }}
        - name: data
          mountPath: /var/lib/vigil
        {{- end }}
        {{- if and .Values.auth.existingSecret .Values.auth.configKey }}
        - name: config
          mountPath: /etc/vigil
          readOnly: true
        {{- end }}
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
    {{- if and .Values.auth.existingSecret .Values.auth.configKey }}
    - name: config
      secret:
        secretName: {{ .Values.auth.existingSecret }}
        defaultMode: 0440
        items:
          - key: {{ .Values.auth.configKey }}
            path: {{ .Values.auth.configKey }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
