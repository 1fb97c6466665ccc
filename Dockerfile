# Multi-stage build: the Swift toolchain image builds emberd and ember; a slim Debian image with
# the LMDB runtime library runs them. `docker build -t ember .` (docker-compose.yml builds it too).
ARG SWIFT_IMAGE=swift:6.3.1-bookworm
FROM ${SWIFT_IMAGE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends liblmdb-dev libjemalloc-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Manifest first: the dependency checkout is cached while only sources change.
COPY Package.swift ./
RUN swift package resolve
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --static-swift-stdlib --product emberd \
    && swift build -c release --static-swift-stdlib --product ember \
    && mkdir -p /out && cp .build/release/emberd .build/release/ember /out/

FROM debian:bookworm-slim
# liblmdb0: the storage engine; libjemalloc2: emberd's malloc; curl: the compose health check; ca-certificates for HTTPS clients.
RUN apt-get update && apt-get install -y --no-install-recommends liblmdb0 libjemalloc2 curl ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data ember \
    && mkdir -p /data /certs && chown ember /data /certs
COPY --from=build /out/emberd /out/ember /usr/local/bin/
USER ember
VOLUME ["/data"]
# 9000: clients (REST, SSE, WebSocket, /healthz, /readyz, /metrics; HTTPS/WSS with --tls-cert and
# --tls-key); 7000: Raft peers (mutual TLS: --peer-tls-cert, --peer-tls-key, --peer-tls-ca).
EXPOSE 9000 7000
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s CMD curl -fsS http://127.0.0.1:9000/healthz || exit 1
ENTRYPOINT ["emberd"]
CMD ["--data", "/data", "--host", "0.0.0.0", "--port", "9000"]
