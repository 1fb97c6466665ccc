# The Ember image: emberd and the admin CLI `ember` on a slim Debian with the LMDB runtime.
# Build it with `make image` (scripts/image.sh), which picks where the binaries come from:
#   BINARIES=source  compiled here in the Swift toolchain image (SWIFT_IMAGE), where it can be pulled;
#   BINARIES=host    binaries built on the host, staged by scripts/image.sh in .image-stage/
#                    (bin/ and any toolchain library they load in lib/), where it cannot.
# The runtime stage below is the same either way. Needs BuildKit (DOCKER_BUILDKIT=1), which
# builds only the stages the chosen BINARIES uses. docker-compose.yml runs the image.
ARG SWIFT_IMAGE=swift:6.3.1-bookworm
ARG BINARIES=source

FROM ${SWIFT_IMAGE} AS binaries-source
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
    && mkdir -p /out/bin /out/lib && cp .build/release/emberd .build/release/ember /out/bin/

FROM scratch AS binaries-host
COPY .image-stage/ /out/

FROM binaries-${BINARIES} AS binaries

FROM debian:bookworm-slim
ARG VERSION=unknown
LABEL org.opencontainers.image.title="Ember" org.opencontainers.image.version="${VERSION}"
# liblmdb0: the storage engine; libjemalloc2: emberd's malloc; curl: the compose health check;
# ca-certificates for HTTPS clients (and trigger receivers); libsqlite3-0, libstdc++6 and zlib1g
# (the trigger delivery's HTTP client) for what the binaries link.
RUN apt-get update && apt-get install -y --no-install-recommends liblmdb0 libjemalloc2 libsqlite3-0 libstdc++6 zlib1g \
        curl ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data ember \
    && mkdir -p /data /certs && chown ember /data /certs
COPY --from=binaries /out/bin/ /usr/local/bin/
# Empty for a release build (the standard library is linked in); a debug build's toolchain libraries.
COPY --from=binaries /out/lib/ /usr/local/lib/ember/
ENV LD_LIBRARY_PATH=/usr/local/lib/ember
USER ember
VOLUME ["/data"]
# 9000: clients (REST, SSE, WebSocket, /healthz, /readyz, /metrics; HTTPS/WSS with --tls-cert and
# --tls-key); 7000: Raft peers (mutual TLS: --peer-tls-cert, --peer-tls-key, --peer-tls-ca).
EXPOSE 9000 7000
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s CMD curl -fsS http://127.0.0.1:9000/healthz || exit 1
ENTRYPOINT ["emberd"]
CMD ["--data", "/data", "--host", "0.0.0.0", "--port", "9000"]
