# One image for the manager and the sidecar: `toolgate manager`, `toolgate sidecar`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY bundle/ bundle/
COPY cli/ cli/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY engine/ engine/
COPY manager/ manager/
COPY manifest/ manifest/
COPY sidecar/ sidecar/
COPY webhook/ webhook/
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/toolgate/toolgate/cli.Version=${VERSION} -X github.com/toolgate/toolgate/cli.Commit=${COMMIT}" \
      -o /out/toolgate ./cmd/toolgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/toolgate /toolgate
USER 65532:65532
ENTRYPOINT ["/toolgate"]
