# pgharbor from this repository: `docker build -t pgharbor .`, then
#   docker run -v /path/to/conf:/etc/pgharbor -p 6432:6432 pgharbor
# with a config whose listen.addresses reaches outside the container
# (e.g. ["*"]) and whose file names are relative to it or absolute inside it.
# Not built by the test suite: no image registry is reachable there.

FROM rust:1-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin pgharbor

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl3 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin pgharbor \
    && mkdir -p /etc/pgharbor
COPY --from=build /src/target/release/pgharbor /usr/bin/pgharbor
COPY conf/pgharbor.toml /etc/pgharbor/pgharbor.toml.example
USER pgharbor
EXPOSE 6432
# pgharbor is PID 1 here and handles its signals itself: SIGTERM (what
# `docker stop` sends) is the safe shutdown, within pool.shutdown_timeout;
# give `docker stop -t` more than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/pgharbor"]
CMD ["--config", "/etc/pgharbor/pgharbor.toml"]
