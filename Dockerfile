# The image the chart runs (deploy/helm/dray: image.repository, image.tag). Not built or
# run in this project's CI (no container runtime there); see README "Kubernetes".
#
#   docker build -t registry.example.com/dray:0.1.0 .
#   docker push registry.example.com/dray:0.1.0
#   helm install dray deploy/helm/dray -n dray --create-namespace \
#     --set image.repository=registry.example.com/dray --set image.tag=0.1.0
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p dray --bin dray

FROM debian:bookworm-slim
# git: promotion steps write with the git CLI; kubectl: `kustomize-build` renders with
# `kubectl kustomize`; ca-certificates: HTTPS to registries, forges and the API server.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates kubernetes-client openssh-client \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/dray /usr/local/bin/dray
# The chart's securityContext runs it as this non-root user with a read-only root.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/dray"]
