# Build the operator and the fetcher (the model-fetch Jobs and the serving
# pods' wait-for-model run it) in one go build, so they share what they compile.
# The builder runs on the building machine's platform and cross-compiles for
# the target's (make docker-buildx: linux/amd64 and linux/arm64).
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY helm-charts/ helm-charts/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o bin/ ./cmd/manager ./cmd/fetcher

# Two static binaries on distroless: no shell, no package manager, non-root.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/bin/manager /workspace/bin/fetcher ./
USER 65532:65532
ENTRYPOINT ["/manager"]
