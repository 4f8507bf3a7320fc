# orq in a container: one image for every role (`orq api`, `orq worker`, `orq scheduler`,
# `orq serve`), the dashboard built in and served by the API at /. Three stages: the dashboard's
# static export (Node), the release binary that embeds it (Rust), and a small runtime image that
# runs as a non-root user. compose.yaml builds it as `orq:local`.
#
# Not built by orq's CI (no container engine runs there; base images cannot be pulled): the
# compose file is validated with docker-compose, and server/tests/compose.rs runs each compose
# service's command and environment as local processes (README, "Containers").

FROM node:20-bookworm-slim AS dashboard
WORKDIR /src/dashboard
COPY dashboard/package.json dashboard/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY dashboard/ ./
RUN npm run build

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The export the binary embeds (rust-embed reads dashboard/out at compile time).
COPY --from=dashboard /src/dashboard/out dashboard/out
# orq-sim beside orq: the dashboard's "Run a simulation" starts it (README, The dashboard).
RUN cargo build --release --locked --bin orq --bin orq-sim

FROM debian:bookworm-slim
# curl for the health checks; ca-certificates for the `http` handler's HTTPS calls; procps for
# kill(1), with which the API stops a simulation run's process group.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl procps \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin orq
COPY --from=build /src/target/release/orq /src/target/release/orq-sim /usr/local/bin/
USER 10001
# 8080: the API and dashboard; 9090: --metrics-listen of workers and schedulers.
EXPOSE 8080 9090
ENTRYPOINT ["orq"]
CMD ["--help"]
