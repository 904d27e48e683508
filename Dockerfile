# One image for the manager and the sidecar: `toolgate manager`, `toolgate sidecar`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/toolgate/toolgate/cli.Version=${VERSION} -X github.com/toolgate/toolgate/cli.Commit=${COMMIT}" \
      -o /out/toolgate ./cmd/toolgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/toolgate /toolgate
USER 65532:65532
ENTRYPOINT ["/toolgate"]
