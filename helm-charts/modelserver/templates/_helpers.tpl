{{/*
Helpers of the modelserver chart. They only lay values out: every decision
(names, labels, replicas, paths, the model config) is made by the operator,
which computes the values (internal/values).
*/}}

{{/*
modelserver.labels: the metadata labels of an object, the common labels plus
app.kubernetes.io/component.
Call: include "modelserver.labels" (dict "root" $ "component" "serving")
*/}}
{{- define "modelserver.labels" -}}
{{- include "modelserver.stringMap" (merge (dict "app.kubernetes.io/component" .component) .root.Values.labels.common) }}
{{- end }}

{{/*
modelserver.stringMap: a map of strings (labels, a selector, annotations),
one quoted key and value a line, in key order. It lays out what toYaml
would, without its round trip through JSON and a YAML parser, which was a
third of what a render allocated.
Call: include "modelserver.stringMap" .Values.labels.selector
*/}}
{{- define "modelserver.stringMap" -}}
{{- $sep := "" }}
{{- range $k, $v := . }}
{{- $sep }}{{ $k | quote }}: {{ $v | quote }}
{{- $sep = "\n" }}
{{- end }}
{{- end }}

{{/*
modelserver.metadata: name, namespace, labels and owner reference of an
object.
Call: include "modelserver.metadata" (dict "root" $ "name" "..." "component" "...")
*/}}
{{- define "modelserver.metadata" -}}
name: {{ .name | quote }}
namespace: {{ .root.Release.Namespace | quote }}
labels:
  {{- include "modelserver.labels" . | nindent 2 }}
{{- with .root.Values.owner }}
ownerReferences:
  - apiVersion: {{ .apiVersion | quote }}
    kind: {{ .kind | quote }}
    name: {{ .name | quote }}
    uid: {{ .uid | quote }}
    controller: true
    blockOwnerDeletion: true
{{- end }}
{{- end }}

{{/*
modelserver.resources: a container's resources, laid out as toYaml would:
limits and requests through modelserver.stringMap, claims (a list) by
toYaml.
Call: include "modelserver.resources" .Values.serving.resources
*/}}
{{- define "modelserver.resources" -}}
{{- $sep := "" }}
{{- range $kind, $v := . }}
{{- $sep }}{{ $kind }}:
{{- if eq $kind "claims" }}
  {{- toYaml $v | nindent 2 }}
{{- else }}
  {{- include "modelserver.stringMap" $v | nindent 2 }}
{{- end }}
{{- $sep = "\n" }}
{{- end }}
{{- end }}

{{/*
modelserver.podSecurityContext: the restricted Pod Security Standard, for
the serving and the fetch pods. fsGroup lets the non-root user write the
model volume and read the credentials.
*/}}
{{- define "modelserver.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/*
modelserver.containerSecurityContext: the restricted Pod Security Standard,
for every container.
*/}}
{{- define "modelserver.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop:
      - ALL
{{- end }}

{{/*
modelserver.initContainer: what follows the name of a serving pod's init
container that runs the operator's image (values' InitContainer), but its
volume mounts.
Call: include "modelserver.initContainer" (dict "root" $ "c" .Values.serving.modelWait)
*/}}
{{- define "modelserver.initContainer" -}}
image: {{ .c.image | quote }}
imagePullPolicy: {{ .c.imagePullPolicy | quote }}
{{- with .c.command }}
command:
  {{- range . }}
  - {{ . | quote }}
  {{- end }}
{{- end }}
args:
  {{- range .c.args }}
  - {{ . | quote }}
  {{- end }}
resources:
  {{- include "modelserver.resources" .c.resources | nindent 2 }}
{{ include "modelserver.containerSecurityContext" .root }}
{{- end }}

{{/*
modelserver.podScheduling: the pod settings the serving and fetch pods share,
what the pod at hand adds to their node selector (an architecture), and its
tolerations (the serving pods may add the GPU taint's).
Call: include "modelserver.podScheduling" (dict "root" $ "nodeSelector" .Values.serving.nodeSelector "tolerations" .Values.pod.tolerations)
*/}}
{{- define "modelserver.podScheduling" -}}
{{- with .root }}
automountServiceAccountToken: false
{{- with .Values.pod.serviceAccountName }}
serviceAccountName: {{ . | quote }}
{{- end }}
{{- with .Values.pod.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- with merge (dict) (.nodeSelector | default dict) (.root.Values.pod.nodeSelector | default dict) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root }}
{{- with .Values.pod.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
modelserver.modelVolumeSource: the source of a pod's model volume: the claim
(the chart's, read-only in the serving pods, or the user's), or, in storage
mode PerPod, a volume of the pod's own: an ephemeral claim of the storage
class, else an emptyDir of the size.
Call: include "modelserver.modelVolumeSource" (dict "root" $ "readOnly" true)
*/}}
{{- define "modelserver.modelVolumeSource" -}}
{{- with .root.Values.volume }}
{{- if and .perPod .storageClassName }}
ephemeral:
  volumeClaimTemplate:
    metadata:
      labels:
        {{- include "modelserver.stringMap" $.root.Values.labels.pod | nindent 8 }}
    spec:
      accessModes:
        - ReadWriteOnce
      storageClassName: {{ .storageClassName | quote }}
      resources:
        requests:
          storage: {{ .size | quote }}
{{- else if .perPod }}
emptyDir:
  sizeLimit: {{ .size | quote }}
{{- else }}
persistentVolumeClaim:
  claimName: {{ .claimName | quote }}
  readOnly: {{ $.readOnly }}
{{- end }}
{{- end }}
{{- end }}
