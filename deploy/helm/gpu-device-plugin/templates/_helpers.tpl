{{/* The kustomization this release is: the mode, with "-rolling" for rollingUpdate. */}}
{{- define "gpu-device-plugin.variant" -}}
{{ .Values.mode }}{{ if .Values.rollingUpdate }}-rolling{{ end }}
{{- end -}}
